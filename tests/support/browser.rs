//! A real Chromium for the web page's tests, driven through Debian's chromedriver (WebDriver,
//! with fantoccini): a fresh profile, headless, no network of its own; closed on drop.
//! Without Chromium the tests fail saying how to install it (they never skip).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// What a test without Chromium is told.
const INSTALL: &str = "the web page's tests drive Chromium through chromedriver: install them with `apt-get install chromium chromium-driver` (.ci/run does), or set AGENTS_TEST_CHROMIUM and AGENTS_TEST_CHROMEDRIVER to their paths";

fn find(env: &str, names: &[&str]) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("{} not found: {INSTALL}", names[0]);
}

/// A headless Chromium with one window.
pub struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and a Chromium whose page is `width` x `height`.
    pub fn start(width: u32, height: u32) -> Self {
        let chromium = find("AGENTS_TEST_CHROMIUM", &["chromium", "chromium-browser"]);
        let chromedriver = find("AGENTS_TEST_CHROMEDRIVER", &["chromedriver"]);
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{} does not start ({e}): {INSTALL}", chromedriver.display())
            });
        let profile = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_string(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage",
                    format!("--user-data-dir={}", profile.path().display()),
                    format!("--window-size={width},{height}"),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = runtime.block_on(async {
            loop {
                let mut builder = ClientBuilder::rustls().expect("a TLS connector");
                builder.capabilities(caps.clone());
                match builder.connect(&url).await {
                    Ok(c) => break c,
                    Err(e) if Instant::now() > deadline => {
                        panic!("chromedriver at {url} does not open a session ({e}): {INSTALL}")
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });
        let browser = Self {
            runtime,
            client: Some(client),
            driver,
            _profile: profile,
        };
        browser.resize(width, height);
        browser
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("the session is open")
    }

    /// Makes the page's viewport `width` x `height` (the window's frame added).
    pub fn resize(&self, width: u32, height: u32) {
        let c = self.client();
        self.runtime.block_on(async {
            c.set_window_size(width, height).await.unwrap();
            let inner = c
                .execute("return [window.innerWidth, window.innerHeight]", vec![])
                .await
                .unwrap();
            let (w, h) = (
                inner[0].as_u64().unwrap() as u32,
                inner[1].as_u64().unwrap() as u32,
            );
            if (w, h) != (width, height) {
                c.set_window_size(
                    width + width.saturating_sub(w),
                    height + height.saturating_sub(h),
                )
                .await
                .unwrap();
            }
        });
    }

    /// Opens `url` and waits for it to load.
    pub fn goto(&self, url: &str) {
        self.runtime
            .block_on(self.client().goto(url))
            .unwrap_or_else(|e| panic!("{url}: {e}"));
    }

    /// The result of `script` (a function body that `return`s a JSON value) on the page.
    pub fn js(&self, script: &str) -> Value {
        self.runtime
            .block_on(self.client().execute(script, vec![]))
            .unwrap_or_else(|e| panic!("{script}: {e}"))
    }

    /// Types `text` into the element `css` names (after clearing it).
    pub fn fill(&self, css: &str, text: &str) {
        self.runtime.block_on(async {
            let e = self
                .client()
                .wait()
                .at_most(Duration::from_secs(10))
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("no {css}: {e}"));
            e.clear().await.unwrap();
            e.send_keys(text).await.unwrap();
        });
    }

    /// Clicks the element `css` names (a link or a form's button) and waits until the page it
    /// leads to has replaced this one and loaded.
    pub fn click(&self, css: &str) {
        self.js("window.__agentsLeaving = true; return null");
        self.click_in_page(css);
        self.wait_for("return !window.__agentsLeaving && document.readyState === 'complete'");
    }

    /// Clicks the element `css` names, which changes this page without leaving it.
    pub fn click_in_page(&self, css: &str) {
        self.runtime.block_on(async {
            let e = self
                .client()
                .wait()
                .at_most(Duration::from_secs(10))
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("no {css}: {e}"));
            e.click().await.unwrap();
        });
    }

    /// Waits up to 30 s until `script` returns something other than `null` or `false`: that.
    pub fn wait_for(&self, script: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // A page being replaced answers with an error: try again.
            let got = self.runtime.block_on(self.client().execute(script, vec![]));
            match got {
                Ok(v) if !v.is_null() && v != Value::Bool(false) => return v,
                _ => {}
            }
            assert!(Instant::now() < deadline, "never true: {script}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the page's notice says `words`: its text.
    pub fn notice(&self, words: &str) -> String {
        let script = format!(
            "const n = document.querySelector('.notice'); return n && n.textContent.includes({}) ? n.textContent : null",
            json!(words)
        );
        self.wait_for(&script)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The text of the element `css` names (waiting up to 10 s for it).
    pub fn text(&self, css: &str) -> String {
        self.runtime.block_on(async {
            let e = self
                .client()
                .wait()
                .at_most(Duration::from_secs(10))
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("no {css}: {e}"));
            e.text().await.unwrap()
        })
    }

    /// Presses and releases `key` (as a keyboard does: to whatever has the focus).
    pub fn press(&self, key: char) {
        let actions = KeyActions::new("keyboard".to_string())
            .then(KeyAction::Down { value: key })
            .then(KeyAction::Up { value: key });
        self.runtime
            .block_on(self.client().perform_actions(actions))
            .unwrap();
    }

    /// Presses Tab.
    pub fn tab(&self) {
        self.press(Key::Tab.into());
    }

    /// The session cookies, as `name=value` pairs (HttpOnly ones too: WebDriver sees them).
    pub fn cookies(&self) -> Vec<(String, String, Option<bool>)> {
        self.runtime
            .block_on(self.client().get_all_cookies())
            .unwrap()
            .iter()
            .map(|c| (c.name().to_string(), c.value().to_string(), c.http_only()))
            .collect()
    }

    /// Writes a PNG of the viewport to `path`.
    pub fn screenshot(&self, path: &Path) {
        let png = self.runtime.block_on(self.client().screenshot()).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// The page's HTML.
    pub fn source(&self) -> String {
        self.runtime.block_on(self.client().source()).unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self.runtime.block_on(c.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Where the tests write their screenshots for a human to look at (not committed).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("web-screenshots")
}
