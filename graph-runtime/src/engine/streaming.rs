//! Streamed runs: the engine's calls, each on a task of its own, with their events sent to a
//! [`RunStream`] (see [`crate::stream`]).

use std::sync::Arc;

use tokio::sync::mpsc;

use super::core::Engine;
use crate::run::{ObserverSlot, RunOptions, RunOutcome};
use crate::state::Reducer;
use crate::stream::{Observer, RunStream, StreamOptions};

impl<S: Reducer> Engine<S> {
    /// Starts a new run, as [`Engine::run`] does, and streams its events (see [`crate::stream`]): the
    /// run goes on in a task of its own; the stream ends with `StreamEvent::Finished` carrying what `run`
    /// would have returned.
    ///
    /// # Examples
    ///
    /// ```
    /// # use graph_runtime::prelude::*;
    /// # use graph_runtime::node::BoxFuture;
    /// use graph_runtime::{StreamEvent, StreamModes, StreamOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), graph_runtime::Error> {
    /// fn talk<'a>(_s: &'a (), ctx: &'a mut Ctx) -> BoxFuture<'a, NodeResult<(), Route>> {
    ///     Box::pin(async move {
    ///         for token in ["Hello", ", ", "world"] {
    ///             ctx.stream(&token).await?;
    ///         }
    ///         Ok(((), Route::End))
    ///     })
    /// }
    /// let graph = Graph::<()>::builder("chat").node("talk", talk).entry("talk").edge("talk", END).build()?;
    /// let engine = Engine::builder(graph).build();
    /// let mut events = engine.stream("chat-1", (), StreamOptions::default().modes(StreamModes::CUSTOM));
    /// let mut said = String::new();
    /// while let Some(event) = events.next().await {
    ///     match event {
    ///         StreamEvent::Custom { payload, .. } => said.push_str(payload.as_str().unwrap()),
    ///         StreamEvent::Finished(out) => assert!(out?.is_completed()),
    ///         _ => {}
    ///     }
    /// }
    /// assert_eq!(said, "Hello, world");
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(&self, run_id: &str, input: S, options: StreamOptions) -> RunStream<S> {
        let (run_id, engine) = (run_id.to_owned(), self.clone());
        self.spawn_streamed(options, move |opts| async move { engine.run_with(&run_id, input, opts).await })
    }

    /// Continues a stored run, as [`Engine::resume`] does, and streams its events.
    pub fn stream_resume(&self, run_id: &str, options: StreamOptions) -> RunStream<S> {
        let (run_id, engine) = (run_id.to_owned(), self.clone());
        self.spawn_streamed(options, move |opts| async move { engine.resume_with(&run_id, opts).await })
    }

    /// Answers interrupts, as [`Engine::resume_with_inputs`] does, and streams the run's events.
    pub fn stream_resume_with_inputs(
        &self,
        run_id: &str,
        inputs: Vec<(String, serde_json::Value)>,
        options: StreamOptions,
    ) -> RunStream<S> {
        let (run_id, engine) = (run_id.to_owned(), self.clone());
        self.spawn_streamed(options, move |opts| async move {
            engine.resume_with_inputs_with(&run_id, inputs, opts).await
        })
    }

    /// Wakes the run, as [`Engine::wake`] does, and streams its events (a `Woken` event after
    /// `RunStarted` says what woke it). A run with nothing due ends the stream at once, as it stands.
    pub fn stream_wake(&self, run_id: &str, options: StreamOptions) -> RunStream<S> {
        let (run_id, engine) = (run_id.to_owned(), self.clone());
        self.spawn_streamed(options, move |opts| async move { engine.wake_with(&run_id, opts).await })
    }

    /// Runs `call` on a task with an observer in its options; its result ends the stream.
    fn spawn_streamed<F, Fut>(&self, options: StreamOptions, call: F) -> RunStream<S>
    where
        F: FnOnce(RunOptions) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = crate::Result<RunOutcome<S>>> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(options.buffer.max(1));
        let observer = Arc::new(Observer::new(tx, options.modes, options.overflow));
        let mut opts = options.run;
        let cancel = options.cancel_on_drop.then(|| opts.cancel.get_or_insert_with(Default::default).clone());
        opts.observer = ObserverSlot(Some(observer.clone()));
        tokio::spawn(async move {
            let out = call(opts).await;
            observer.finish(out).await;
        });
        RunStream::new(rx, cancel)
    }
}
