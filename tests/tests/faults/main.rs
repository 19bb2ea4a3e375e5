//! Fault tests: real processes killed at every commit point and at random, effects across crashes,
//! damaged files, full and failing devices, on sled and SQLite (and the server stores with their
//! features). One binary, one module per topic.

mod crash;
mod effects_crash;
mod faults_damage;
mod faults_device;
mod salvage;
mod sqlite_damage;
mod sqlite_faults;
mod timers_crash;
mod versions_crash;
