"""The inspector in a real browser (headless Chromium through chromedriver and Selenium): the runs list,
a run's page with its graph, steps, state and diff, answering its question and seeing the run complete,
and a run whose stored strings are hostile markup shown as text. Screenshots go to the folder given.

    python browser_test.py <base URL> <token> <screenshot folder>
"""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

base, token, shots = sys.argv[1], sys.argv[2], sys.argv[3]
options = webdriver.ChromeOptions()
for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400"]:
    options.add_argument(flag)
options.binary_location = "/usr/bin/chromium"
# Debian's chromium and its driver: nothing is downloaded.
driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
wait = WebDriverWait(driver, 20)
failures = []


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


try:
    # The runs list.
    driver.get(base + "/")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "a.run-link")))
    ids = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "a.run-link")]
    check("the runs list shows every run: %s" % ids, sorted(ids) == ["expense-1", "order-1", "xss-1"])
    check("the list shows statuses", "interrupted" in driver.find_element(By.TAG_NAME, "table").text)
    driver.save_screenshot(shots + "/runs.png")

    # A completed run: graph, steps, state, diff.
    driver.find_element(By.LINK_TEXT, "order-1").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#timeline tbody tr")))
    wait.until(lambda d: d.execute_script("const g = document.getElementById('graph'); return g && g.complete && g.naturalWidth > 0"))
    check("the graph is drawn", driver.execute_script("return document.getElementById('graph').naturalWidth") > 100)
    rows = driver.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    check("the steps are listed (%d)" % len(rows), len(rows) == 4)
    wait.until(lambda d: "amount_cents" in d.find_element(By.ID, "state").text)
    check("the state is shown", "3000" in driver.find_element(By.ID, "state").text)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#diff table tbody tr"))
    check("the diff between the first and last steps is shown", "receipt" in driver.find_element(By.ID, "diff").text)
    wait.until(lambda d: "verified" in d.find_element(By.ID, "verify").text)
    check("the log verifies", "verified" in driver.find_element(By.ID, "verify").text)

    # A waiting run: answer its question, see it complete.
    driver.get(base + "/#/run/expense-1")
    wait.until(ec.presence_of_element_located((By.ID, "answer-input")))
    svg = driver.execute_script("return fetch(document.getElementById('graph').src).then(r => r.text())")
    check("the graph marks the node the run waits on", 'class="node waiting" data-node="approve"' in svg)
    driver.save_screenshot(shots + "/run-waiting.png")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "answer-input").send_keys("maybe")
    driver.find_element(By.CSS_SELECTOR, "#actions button.action").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#actions .error"))
    check("an answer that is not JSON is refused on the page", "JSON" in driver.find_element(By.CSS_SELECTOR, "#actions .error").text)
    box = driver.find_element(By.ID, "answer-input")
    box.clear()
    box.send_keys("true")
    driver.find_element(By.CSS_SELECTOR, "#actions button.action").click()
    plan = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#actions .plan"))).text
    check("the action says what it will do: %r" % plan, "Answer question" in plan and "true" in plan)
    driver.find_element(By.CSS_SELECTOR, "#actions .confirm-go").click()
    wait.until(lambda d: "completed" in d.find_element(By.ID, "run-status").text)
    check("the run completed", "completed" in driver.find_element(By.ID, "run-status").text)
    driver.save_screenshot(shots + "/run-completed.png")

    # Hostile strings are text.
    driver.get(base + "/#/run/xss-1")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#waits code.payload")))
    wait.until(lambda d: "onerror" in d.find_element(By.ID, "state").text)
    time.sleep(0.5)
    check("no injected script ran", driver.execute_script("return window.__xss === undefined"))
    check("no injected element exists", driver.execute_script("return document.querySelectorAll('img[src=\"x\"], main script').length") == 0)
    check("the markup is shown as text", "<img src=x" in driver.find_element(By.CSS_SELECTOR, "#waits code.payload").text)
    driver.save_screenshot(shots + "/xss.png")
finally:
    driver.quit()

print("%d checks failed" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
