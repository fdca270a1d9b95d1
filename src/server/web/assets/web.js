// The page's only script: everything works without it except the live events box.
// - the theme toggle (light/dark, kept in localStorage; the system's theme until chosen);
// - the TUI's keys on the plan page: j/k (or n/p) next/previous hunk, a or Space accept,
//   r or x reject (focuses the reason), m mark reviewed, u withdraw the mark;
// - the live events of the plan, from its event stream (Server-Sent Events).
(function () {
  "use strict";
  var root = document.documentElement;
  var saved = null;
  try { saved = localStorage.getItem("agents-theme"); } catch (e) { /* private mode */ }
  if (saved === "light" || saved === "dark") root.setAttribute("data-theme", saved);

  function currentTheme() {
    var set = root.getAttribute("data-theme");
    if (set) return set;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.querySelector(".theme-toggle");
    if (toggle) {
      var label = function () {
        toggle.textContent = currentTheme() === "dark" ? "Light theme" : "Dark theme";
      };
      toggle.hidden = false;
      label();
      toggle.addEventListener("click", function () {
        var next = currentTheme() === "dark" ? "light" : "dark";
        root.setAttribute("data-theme", next);
        try { localStorage.setItem("agents-theme", next); } catch (e) { /* ignored */ }
        label();
      });
    }
    hunkKeys();
    liveEvents();
  });

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  function hunkKeys() {
    var hunks = Array.prototype.slice.call(document.querySelectorAll(".hunk[data-hunk]"));
    if (!hunks.length) return;
    var keys = document.querySelector(".keys");
    if (keys) keys.hidden = false;
    var current = -1;
    if (location.hash.indexOf("#hunk-") === 0) {
      current = hunks.findIndex(function (h) { return "#" + h.id === location.hash; });
    }
    function select(i) {
      if (i < 0 || i >= hunks.length) return;
      if (current >= 0) hunks[current].classList.remove("current");
      current = i;
      hunks[i].classList.add("current");
      hunks[i].focus({ preventScroll: true });
      hunks[i].scrollIntoView({ block: "nearest" });
    }
    function within(e) {
      // The hunk the key is for: the one holding the focus, else the selected one.
      var h = e.target && e.target.closest ? e.target.closest(".hunk[data-hunk]") : null;
      if (h) return h;
      return current >= 0 ? hunks[current] : null;
    }
    function press(h, css) {
      var b = h && h.querySelector(css);
      if (!b) return false;
      b.click();
      return true;
    }
    document.addEventListener("keydown", function (e) {
      if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
      var h = within(e);
      switch (e.key) {
        case "j": case "n": select(Math.min(current + 1, hunks.length - 1)); break;
        case "k": case "p": select(Math.max(current - 1, 0)); break;
        case " ":
          // Space on a button or link is that control's own.
          if (e.target && /^(BUTTON|A|SUMMARY)$/.test(e.target.tagName)) return;
          if (!press(h, "button.accept")) return;
          break;
        case "a": if (!press(h, "button.accept")) return; break;
        case "m": if (!press(h, "button.seen")) return; break;
        case "u": if (!press(h, "button.reset")) return; break;
        case "r": case "x":
          if (!h || !h.querySelector(".reject-form input[name=reason]")) return;
          h.querySelector(".reject-form input[name=reason]").focus();
          break;
        default: return;
      }
      e.preventDefault();
    });
  }

  function summary(data) {
    if (!data || typeof data !== "object") return "";
    var parts = [];
    Object.keys(data).forEach(function (k) {
      var v = data[k];
      if (v === null || v === undefined || typeof v === "object") return;
      var s = String(v);
      if (s.length > 80) s = s.slice(0, 79) + "…";
      parts.push(k + "=" + s);
    });
    return parts.slice(0, 6).join(" ");
  }

  function liveEvents() {
    var box = document.getElementById("events");
    if (!box || !window.EventSource) return;
    var list = box.querySelector(".events");
    var state = box.querySelector(".events-state");
    var plan = box.getAttribute("data-plan");
    var open = null;
    function add(text, cls) {
      var li = document.createElement("li");
      li.textContent = text;
      if (cls) li.className = cls;
      list.appendChild(li);
      while (list.children.length > 300) list.removeChild(list.firstChild);
      list.scrollTop = list.scrollHeight;
      return li;
    }
    state.textContent = "Connecting…";
    var source = new EventSource("/plans/" + encodeURIComponent(plan) + "/events");
    source.onopen = function () { state.textContent = "Following the plan's events as they happen."; };
    source.onmessage = function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (err) { return; }
      open = null;
      var who = e.caused_by ? " (" + e.caused_by + ")" : "";
      add("#" + e.seq + " " + e.type + who + " " + summary(e.data));
    };
    source.addEventListener("live", function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (err) { return; }
      var k = e.kind || {};
      if (k.type === "text_delta" || k.type === "step_output") {
        var text = k.text || k.line || "";
        if (!open) open = add("", "live");
        open.textContent += text;
        if (k.type !== "text_delta") { open.textContent += "\n"; open = null; }
      } else {
        open = null;
        add(k.type + " " + summary(k), "live");
      }
    });
    source.addEventListener("end", function () {
      state.textContent = "The plan is final: no more events.";
      source.close();
    });
    source.addEventListener("error", function (m) {
      if (m && m.data) {
        try { state.textContent = JSON.parse(m.data).error.message; } catch (err) { /* ignored */ }
        source.close();
      } else {
        state.textContent = "The event stream was interrupted; reconnecting…";
      }
    });
  }
})();
