"""The inspector in a real browser (headless Chromium through chromedriver and Selenium): the runs list,
a run's page with its graph, steps, state and diff, answering its question and seeing the run complete,
and a run whose stored strings are hostile markup shown as text. Screenshots go to the folder given.

    python browser_test.py <base URL> <token> <screenshot folder>
"""
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
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
# The page redraws itself (a live update, an action's result): an element read while it is replaced is
# read again, not a failure.
wait = WebDriverWait(driver, 20, ignored_exceptions=[NoSuchElementException, StaleElementReferenceException])
failures = []


def links(d):
    """The run ids the list shows (none while it loads)."""
    try:
        return [a.text for a in d.find_elements(By.CSS_SELECTOR, "a.run-link")]
    except Exception:  # the list was redrawn under the read
        return []


def completed(d):
    """The run's status line once it says completed (read whole: the page may redraw it meanwhile)."""
    text = d.find_element(By.ID, "run-status").text
    return text if "completed" in text else False


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


try:
    # The runs list.
    driver.get(base + "/")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "a.run-link")))
    ids = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "a.run-link")]
    named = ["expense-1", "expense-2", "order-1", "xss-1"]
    check("the first page: 50 runs in id order: %s…" % ids[:5],
          ids == named + ["zz-%02d" % i for i in range(46)])
    check("the list shows statuses", "interrupted" in driver.find_element(By.TAG_NAME, "table").text)
    driver.save_screenshot(shots + "/runs.png")
    driver.find_element(By.ID, "next").click()
    wait.until(lambda d: links(d)[:1] == ["zz-46"])
    ids = links(driver)
    check("the next page: the rest (%d)" % len(ids), ids == ["zz-%02d" % i for i in range(46, 60)])
    check("the last page offers no next", not driver.find_elements(By.ID, "next"))
    driver.find_element(By.ID, "previous").click()
    wait.until(lambda d: links(d)[:1] == ["expense-1"])
    check("previous goes back to the first page", not driver.find_elements(By.ID, "previous"))
    search = driver.find_element(By.ID, "search")
    search.send_keys("ord")
    search.send_keys("\n")
    wait.until(lambda d: links(d) == ["order-1"])
    check("a search by id prefix lists its runs", True)

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
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#events table tbody tr"))
    events = driver.find_element(By.ID, "events").text
    check("the event log is listed", all(t in events for t in ["RUN_STARTED", "STEP_COMMITTED", "EFFECT_RECORDED", "RUN_COMPLETED"]))
    took = [r.find_elements(By.TAG_NAME, "td")[2].text for r in rows[1:]]
    check("the timeline gives the time each step took: %s" % took, all(t.endswith(("ms", " s", "min", " h")) for t in took))
    outcomes = [r.find_elements(By.TAG_NAME, "td")[4].text for r in rows]
    check("the timeline gives each step's outcome and what it recorded: %s" % outcomes,
          outcomes[0] == "started" and "effect card.charge" in outcomes[2] and outcomes[-1].endswith("completed"))
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#outbox table tbody tr"))
    check("the outbox lists the receipt and the shipment", "receipts" in driver.find_element(By.ID, "outbox").text and "shipments" in driver.find_element(By.ID, "outbox").text)

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
    status = wait.until(lambda d: completed(d))
    check("the run completed: %r" % status, "completed" in status)
    driver.save_screenshot(shots + "/run-completed.png")

    # Live: a run answered elsewhere (here through the API, as another operator would) updates the open
    # page by the server's events, with no reload.
    driver.get(base + "/#/run/expense-2")
    wait.until(ec.presence_of_element_located((By.ID, "answer-input")))
    driver.execute_script("window.__same_page = 1")
    answered = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/runs/expense-2/answer', {method: 'POST', headers: {'content-type': 'application/json',
            'authorization': 'Bearer ' + arguments[0]}, body: JSON.stringify({input: true})})
          .then(r => done(r.status), e => done(String(e)));""", token)
    check("the answer through the API is taken (%s)" % answered, answered == 200)
    wait.until(lambda d: completed(d))
    check("the open page shows the run completed, without a reload",
          driver.execute_script("return window.__same_page") == 1)

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
