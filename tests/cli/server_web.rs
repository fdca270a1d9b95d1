//! The web page the server answers at `/` (spec section 21, "CLI-first + TUI + Web App"),
//! driven in a real Chromium: signing in with a token, the plan list, a plan waiting at its
//! apply gate reviewed and approved through the page (and seen from the command line), a
//! forged POST refused, and the page on a phone-sized screen and by keyboard.

use serde_json::Value;

use crate::support::Env;
use crate::support::browser::{Browser, screenshot_dir};
use crate::support::server::{Server, server_with_a_plan};

/// Signs `browser` in to `server` with `token`.
fn sign_in(browser: &Browser, server: &Server, token: &str) {
    browser.goto(&format!("{}/login", server.url));
    browser.fill("#token", token);
    browser.click("form[action='/login'] button[type=submit]");
}

/// The review as `agents --server URL plan review PLAN` prints it (json): every item by id.
fn review_items(server: &Server, plan: &str) -> Vec<Value> {
    let (doc, code) = server.client_json(&Env::new(), &["plan", "review", plan]);
    assert_eq!(code, 0, "{doc:#}");
    doc["data"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["items"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn a_wrong_token_gets_one_message_that_names_no_user_and_the_right_one_signs_in() {
    let (server, plan) = server_with_a_plan();
    let browser = Browser::start(1280, 800);
    browser.goto(&server.url);
    assert!(
        browser.js("return location.pathname") == "/login",
        "a browser without a session is sent to the sign-in form"
    );
    let mut messages = Vec::new();
    // Garbage, a well-formed token that was never issued, and a user's name.
    for wrong in ["nonsense", "agt_0123456789abcdef0123456789abcdef", "tests"] {
        sign_in(&browser, &server, wrong);
        assert_eq!(browser.js("return location.pathname"), "/login");
        messages.push(browser.text(".error"));
    }
    assert!(
        messages
            .iter()
            .all(|m| m == "that token is not valid on this server"),
        "{messages:?}"
    );
    assert!(
        browser
            .cookies()
            .iter()
            .all(|(n, _, _)| n != "agents_session")
    );

    sign_in(&browser, &server, &server.token);
    assert_eq!(browser.js("return location.pathname"), "/");
    let (_, _, http_only) = browser
        .cookies()
        .into_iter()
        .find(|(n, _, _)| n == "agents_session")
        .expect("a session cookie");
    assert_eq!(http_only, Some(true));
    assert_eq!(
        browser.js("return document.cookie.includes('agents_session')"),
        false,
        "the page's scripts cannot read the session"
    );
    let list = browser.text(".plans");
    assert!(list.contains("quickstart-format"), "{list}");
    assert!(list.contains(&plan[..8]), "{list}");
    assert!(list.contains("1 approval(s) waiting"), "{list}");

    // The filters are the plan list's: a state no plan is in shows none.
    browser.goto(&format!("{}/?state=cancelled", server.url));
    assert!(
        browser
            .text("main")
            .contains("No plan matches these filters")
    );

    // Signing out ends the session: the list asks for a token again.
    browser.goto(&server.url);
    browser.click("form[action='/logout'] button");
    assert_eq!(browser.js("return location.pathname"), "/login");
    browser.goto(&server.url);
    assert_eq!(browser.js("return location.pathname"), "/login");
}

#[test]
fn a_reviewer_rejects_one_hunk_with_a_reason_and_approves_through_the_page() {
    let (server, plan) = server_with_a_plan();
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &server.token);
    browser.goto(&format!("{}/plans/{plan}", server.url));

    // The plan page: status, the decision tree, the diff with its file list, the approval.
    assert!(browser.text(".status").contains("execute/complete"));
    let tree = browser.text("#tree");
    assert!(tree.contains("prompt definition"), "{tree}");
    assert!(
        tree.contains("Why:"),
        "the decisions carry their explanation: {tree}"
    );
    let files = browser.text("nav[aria-label='Changed files']");
    assert!(
        files.contains("src/summary.py") && files.contains("tests/run.sh"),
        "{files}"
    );
    assert!(browser.text("#approvals").contains("phase gate: apply"));
    let hunks: Vec<String> =
        serde_json::from_value(browser.js(
            "return [...document.querySelectorAll('.hunk[data-hunk]')].map(h => h.dataset.hunk)",
        ))
        .unwrap();
    assert!(hunks.len() >= 2, "{hunks:?}");
    let diffs = browser.text("#changes");
    assert!(diffs.contains("def summary(text):"), "{diffs}");

    // Reject the first hunk with a reason.
    let reason = "keep the trailing tab: a test compares it";
    browser.fill(
        &format!("#hunk-{} .reject-form input[name=reason]", hunks[0]),
        reason,
    );
    browser.click(&format!("#hunk-{} button.reject", hunks[0]));
    browser.notice("rejected");
    assert!(
        browser
            .text(&format!("#hunk-{}", hunks[0]))
            .contains(reason)
    );

    // The command line sees the same mark, reason and all.
    let items = review_items(&server, &plan);
    let first = items.iter().find(|i| i["id"] == hunks[0].as_str()).unwrap();
    assert_eq!(first["mark"], "rejected", "{first:#}");
    assert_eq!(first["reason"], reason);

    // Accept the next one by keyboard, as in the TUI: j selects it, a accepts it (the page
    // came back at the rejected hunk).
    browser.press('j');
    browser.press('a');
    browser.notice("accepted");
    let items = review_items(&server, &plan);
    let second = items.iter().find(|i| i["id"] == hunks[1].as_str()).unwrap();
    assert_eq!(second["mark"], "accepted", "{second:#}");

    // Approve the apply gate: Apply writes the accepted hunk only.
    browser.click(".approval button.approve");
    browser.notice("applied/");
    let (doc, code) = server.client_json(&Env::new(), &["plan", "status", &plan]);
    assert_eq!(code, 0);
    assert_eq!(doc["data"]["phase"], "applied", "{doc:#}");
    // The marks and the approval are in the audit log, the signed-in user's, as the CLI's are.
    let (audit, code) = server.client_json(&Env::new(), &["server", "audit"]);
    assert_eq!(code, 0, "{audit:#}");
    let rows = audit["data"]["rows"].as_array().unwrap();
    for operation in ["run.review", "run.apply"] {
        assert!(
            rows.iter()
                .any(|r| r.to_string().contains(operation) && r.to_string().contains("\"tests\"")),
            "no {operation} row of user tests: {audit:#}"
        );
    }
}

#[test]
fn a_forged_post_without_the_form_token_changes_nothing() {
    let (server, plan) = server_with_a_plan();
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &server.token);
    browser.goto(&format!("{}/plans/{plan}", server.url));
    let hunk = browser.js("return document.querySelector('.hunk[data-hunk]').dataset.hunk");
    let hunk = hunk.as_str().unwrap().to_string();

    // A form another page would post: the session's cookie goes along, its token does not.
    browser.js(&format!(
        "window.__agentsLeaving = true;
         const f = document.createElement('form'); f.method = 'post';
         f.action = '/plans/{plan}/review';
         for (const [k, v] of [['item', '{hunk}'], ['mark', 'rejected'], ['reason', 'forged']]) {{
           const i = document.createElement('input'); i.type = 'hidden'; i.name = k; i.value = v;
           f.appendChild(i);
         }}
         document.body.appendChild(f); f.submit(); return null"
    ));
    browser.wait_for("return !window.__agentsLeaving && document.readyState === 'complete'");
    let page = browser.text("main");
    assert!(page.contains("nothing was changed"), "{page}");
    let approvals =
        browser.js("return fetch('/approvals/x/approve', {method: 'POST'}).then(r => r.status)");
    assert_eq!(approvals, 403);

    // With the right form token but from another site's page (its Origin), refused too.
    let session = browser
        .cookies()
        .into_iter()
        .find(|(n, _, _)| n == "agents_session")
        .unwrap()
        .1;
    browser.goto(&format!("{}/plans/{plan}", server.url));
    let csrf = browser.js("return document.querySelector('input[name=csrf]').value");
    let body = format!(
        "csrf={}&item={hunk}&mark=rejected&reason=forged",
        csrf.as_str().unwrap()
    );
    let (status, page) = server.raw(
        &format!(
            "POST /plans/{plan}/review HTTP/1.1\r\nCookie: agents_session={session}\r\nOrigin: http://evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(status, 403, "{page}");

    let items = review_items(&server, &plan);
    assert!(
        items.iter().all(|i| i["mark"] == "pending"),
        "no forged mark stored: {items:#?}"
    );
    let (doc, _) = server.client_json(&Env::new(), &["plan", "status", &plan]);
    assert_eq!(doc["data"]["phase"], "execute", "{doc:#}");
}

/// Every control of the page, in document order, tagged with its index; their number.
const TAG_FOCUSABLE: &str = "
    const all = [...document.querySelectorAll(
      'a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), select, textarea, summary, [tabindex]:not([tabindex=\"-1\"])')]
      .filter(e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden');
    all.forEach((e, i) => e.setAttribute('data-tab', String(i)));
    return all.length";

#[test]
fn the_plan_page_fits_a_phone_and_every_control_is_reachable_by_tab() {
    let (server, plan) = server_with_a_plan();
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &server.token);
    let page = format!("{}/plans/{plan}", server.url);
    browser.goto(&page);
    let dir = screenshot_dir();
    browser.screenshot(&dir.join("plan-1280x800.png"));
    browser.js("document.getElementById('changes').scrollIntoView(); return null");
    browser.screenshot(&dir.join("plan-1280x800-changes.png"));

    browser.resize(390, 844);
    browser.goto(&page);
    browser.screenshot(&dir.join("plan-390x844.png"));
    let fits = browser.js("const d = document.documentElement;
         return {scroll: d.scrollWidth, inner: innerWidth, client: d.clientWidth}");
    assert_eq!(fits["inner"], 390, "{fits}");
    assert!(
        fits["scroll"].as_u64() <= fits["inner"].as_u64()
            && fits["scroll"].as_u64() <= fits["client"].as_u64(),
        "the page scrolls sideways at 390 px: {fits}"
    );
    // The diff scrolls inside its own box instead.
    let boxes = browser.js(
        "return [...document.querySelectorAll('.diff')].map(d => getComputedStyle(d).overflowX)",
    );
    assert!(
        boxes.as_array().unwrap().iter().all(|o| o == "auto"),
        "{boxes}"
    );

    browser.js("document.getElementById('changes').scrollIntoView(); return null");
    browser.screenshot(&dir.join("plan-390x844-changes.png"));
    browser.js("document.querySelector('.hunk .actions').scrollIntoView(); return null");
    browser.screenshot(&dir.join("plan-390x844-hunk-actions.png"));
    // The plan list and a decision's page fit too.
    let decision = browser.js("return document.querySelector('.hunk .hunk-head a').href");
    for (other, name) in [
        (server.url.clone(), "plans-390x844.png"),
        (
            decision.as_str().unwrap().to_string(),
            "decision-390x844.png",
        ),
    ] {
        browser.goto(&other);
        browser.screenshot(&dir.join(name));
        let fits = browser.js(
            "const d = document.documentElement; return d.scrollWidth <= Math.min(innerWidth, d.clientWidth)",
        );
        assert_eq!(fits, true, "{other} scrolls sideways at 390 px");
    }
    browser.goto(&page);
    browser.js("document.getElementById('changes').scrollIntoView(); return null");
    // The other theme, chosen with the toggle (the system's until then).
    browser.click_in_page(".theme-toggle");
    browser.screenshot(&dir.join("plan-390x844-changes-other-theme.png"));
    browser.js("document.getElementById('tree').scrollIntoView(); return null");
    browser.screenshot(&dir.join("plan-390x844-tree-other-theme.png"));
    browser.goto(&page);

    // Tab from the top of the page visits every control once, each with a visible focus
    // (once the script has shown the theme toggle).
    browser.wait_for("return !document.querySelector('.theme-toggle').hidden");
    let count = browser.js(TAG_FOCUSABLE).as_u64().unwrap() as usize;
    assert!(count > 10, "the plan page has its controls: {count}");
    browser.js("document.activeElement.blur(); window.scrollTo(0, 0); return null");
    let mut reached = Vec::new();
    for _ in 0..count + 3 {
        browser.tab();
        let at = browser.js("const e = document.activeElement;
             if (!e || e === document.body) return null;
             const s = getComputedStyle(e);
             return {tab: e.getAttribute('data-tab'), html: e.outerHTML.slice(0, 120),
                     outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0}");
        if at.is_null() {
            continue;
        }
        assert!(
            at["tab"].is_string(),
            "Tab reached something that is not a listed control: {at}"
        );
        assert_eq!(at["outline"], true, "no visible focus on {at}");
        let tab: usize = at["tab"].as_str().unwrap().parse().unwrap();
        if reached.first() == Some(&tab) {
            break;
        }
        reached.push(tab);
    }
    let expected: Vec<usize> = (0..count).collect();
    assert_eq!(reached, expected, "Tab visits every control, in order");
}

/// A token for a new user `user` of `server` (created through the CLI by the administrator).
fn token_for(server: &Server, user: &str) -> String {
    let admin = Env::new();
    let (_, code) = server.client_json(&admin, &["server", "user", "add", user]);
    assert_eq!(code, 0);
    let (doc, code) = server.client_json(&admin, &["server", "token", "create", "--user", user]);
    assert_eq!(code, 0, "{doc:#}");
    doc["data"]["token"].as_str().unwrap().to_string()
}

#[test]
fn a_refused_action_shows_the_engines_message_and_hint_and_changes_nothing() {
    let (server, plan) = server_with_a_plan();
    let token = token_for(&server, "vic");
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &token);
    browser.goto(&format!("{}/plans/{plan}", server.url));
    browser.click(".approval button.approve");
    let page = browser.text("main");
    assert!(page.contains("PERMISSION_DENIED"), "{page}");
    assert!(page.contains("needs maintainer or above"), "{page}");
    assert!(
        page.contains("agents server org member add"),
        "the hint: {page}"
    );
    let (doc, _) = server.client_json(&Env::new(), &["plan", "status", &plan]);
    assert_eq!(doc["data"]["phase"], "execute", "{doc:#}");
}

#[test]
fn revoking_the_token_ends_its_web_session() {
    let (server, plan) = server_with_a_plan();
    let admin = Env::new();
    let (doc, code) = server.client_json(
        &admin,
        &["server", "token", "create", "--user", "tests", "browser"],
    );
    assert_eq!(code, 0, "{doc:#}");
    let token = doc["data"]["token"].as_str().unwrap().to_string();
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &token);
    browser.goto(&format!("{}/plans/{plan}", server.url));
    assert_eq!(
        browser.js("return location.pathname"),
        format!("/plans/{plan}")
    );
    // The page follows the plan's events, the stored ones first.
    let events = browser.wait_for(
        "const l = document.querySelector('#events .events');
         return l && l.textContent.includes('plan_created') ? l.textContent : null",
    );
    assert!(events.as_str().unwrap().contains("phase_"), "{events}");

    let (doc, code) = server.client_json(&admin, &["server", "token", "revoke", "browser"]);
    assert_eq!(code, 0, "{doc:#}");
    browser.goto(&format!("{}/plans/{plan}", server.url));
    assert_eq!(browser.js("return location.pathname"), "/login");
}

#[test]
fn a_decision_shows_its_explanation_impact_and_dry_run_estimate_and_is_corrected_from_its_page() {
    let (server, plan) = server_with_a_plan();
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &server.token);
    browser.goto(&format!("{}/plans/{plan}", server.url));
    // The decision that produced the first hunk, from the hunk's header.
    browser.click(".hunk .hunk-head a");
    let page = browser.text("main");
    for shown in [
        "Explanation",
        "Script step",
        "Impact of correcting it",
        "step(s) re-run",
        "Dry run:",
        "Nothing has changed yet",
    ] {
        assert!(page.contains(shown), "{shown}: {page}");
    }
    let (before, _) = server.client_json(&Env::new(), &["plan", "status", &plan]);

    browser.fill("#guidance", "tidy only the files the tests do not compare");
    browser.click("form[action$='/correct'] button[type=submit]");
    let notice = browser.notice("Correction attempt");
    assert!(notice.contains("the plan is now at"), "{notice}");
    let (after, code) = server.client_json(&Env::new(), &["plan", "status", &plan]);
    assert_eq!(code, 0, "{after:#}");
    assert_eq!(
        after["data"]["corrections"].as_array().map(Vec::len),
        Some(before["data"]["corrections"].as_array().map_or(0, Vec::len) + 1),
        "one correction attempt recorded: {after:#}"
    );
}

#[test]
fn rejecting_the_apply_gate_through_the_page_is_plan_reject_with_its_reason() {
    let (server, plan) = server_with_a_plan();
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &server.token);
    browser.goto(&format!("{}/plans/{plan}", server.url));
    browser.fill(".approval .reject-form input[name=reason]", "not this week");
    browser.click(".approval .reject-form button");
    let notice = browser.notice("Rejected apr_");
    assert!(notice.contains("execute/complete"), "{notice}");
    assert!(
        browser
            .text("#approvals")
            .contains("Nothing waits for an answer")
    );
    let (doc, code) = server.client_json(&Env::new(), &["plan", "status", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["state_reason"], "gate_rejected", "{doc:#}");
    assert_eq!(
        doc["data"]["pending_approvals"],
        serde_json::json!([]),
        "{doc:#}"
    );
}

/// A step that waits (time for the page to open its event stream), then one that prints a
/// line a second.
const TALKING: &str = "name: local/talking\ndefinition-of-done: TWO.md exists\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: wait\n    run: sleep 8\n  - name: talk\n    run: for i in 1 2 3 4 5 6; do echo live-line-$i; sleep 1; done; printf 'two\\n' > TWO.md\n";

#[test]
fn the_live_events_box_shows_a_running_steps_output_lines() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let repo = crate::support::git_repo(client.root(), "repo");
    let action = client.root().join("talking.yaml");
    std::fs::write(&action, TALKING).unwrap();
    for args in [
        &[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ][..],
        &[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap(),
        ],
        &["project", "create", "app"],
        &["project", "link-resource", "app", "local/repo"],
    ] {
        let (doc, code) = server.client_json(&client, args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &server.token);
    let mut running = server
        .client(
            &client,
            &[
                "plan",
                "use",
                "local/talking",
                "app",
                "--automation-profile=trusted",
            ],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The plan, once it exists, from the list.
    let plan = browser.wait_for(
        "return fetch('/').then(r => r.text()).then(t => (t.match(/href=\"\\/plans\\/([0-9A-Z]{26})\"/) || [])[1] || null)",
    );
    browser.goto(&format!("{}/plans/{}", server.url, plan.as_str().unwrap()));
    // The page opens while the first step runs, without waiting for it.
    assert!(browser.text("#changes").contains("A step is running"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    loop {
        let shown = browser.js("return document.getElementById('events').innerText");
        if shown.as_str().unwrap().contains("live-line-") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no output line in the live events box: {shown}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let _ = running.wait();
}

#[test]
fn marking_a_hunk_reviewed_through_the_page_names_its_reviewer_on_the_command_line() {
    let (server, plan) = server_with_a_plan();
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &server.token);
    browser.goto(&format!("{}/plans/{plan}", server.url));
    let hunk = browser.js("return document.querySelector('.hunk[data-hunk]').dataset.hunk");
    let hunk = hunk.as_str().unwrap().to_string();
    // By keyboard, as in the TUI: j selects the first hunk, m marks it reviewed.
    browser.press('j');
    browser.press('m');
    browser.notice("reviewed");
    let items = review_items(&server, &plan);
    let item = items.iter().find(|i| i["id"] == hunk.as_str()).unwrap();
    assert_eq!(item["mark"], "reviewed", "{item:#}");
    assert_eq!(item["marks"][0]["reviewer"], "tests", "{item:#}");
    // The page names who marked it, and the mark can be withdrawn.
    assert!(
        browser
            .text(&format!("#hunk-{hunk} .marks"))
            .contains("tests reviewed")
    );
    browser.click(&format!("#hunk-{hunk} button.reset"));
    browser.notice("withdrawn");
    let items = review_items(&server, &plan);
    let item = items.iter().find(|i| i["id"] == hunk.as_str()).unwrap();
    assert_eq!(item["mark"], "pending", "{item:#}");
}

#[test]
fn approving_a_failed_apply_on_the_page_retries_the_apply() {
    let (server, plan) = server_with_a_plan();
    let (doc, code) = server.client_json(&Env::new(), &["resource", "list"]);
    assert_eq!(code, 0, "{doc:#}");
    let repo = doc["data"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "git-checkout")
        .and_then(|r| r["path"].as_str().or(r["properties"]["path"].as_str()))
        .unwrap_or_else(|| panic!("a checkout: {doc:#}"))
        .to_string();
    // A stale lock makes the first Apply fail: the plan waits with an errored approval.
    let lock = std::path::Path::new(&repo).join(".git/index.lock");
    std::fs::write(&lock, b"").unwrap();
    let (doc, code) = server.client_json(&Env::new(), &["plan", "apply", "--yes", &plan]);
    assert_ne!(code, 0, "{doc:#}");
    std::fs::remove_file(&lock).unwrap();
    let browser = Browser::start(1280, 800);
    sign_in(&browser, &server, &server.token);
    browser.goto(&format!("{}/plans/{plan}", server.url));
    assert!(browser.text("#approvals").contains("errored"));
    browser.click(".approval button.approve");
    browser.notice("applied/");
    let (doc, code) = server.client_json(&Env::new(), &["plan", "status", &plan]);
    assert_eq!(code, 0);
    assert_eq!(doc["data"]["phase"], "applied", "{doc:#}");
}
