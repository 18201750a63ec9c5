// Live parts are polled with ETags: the browser revalidates (If-None-Match) and the server
// answers 304 when nothing changed; then the part is left alone instead of being swapped in
// again. A request that fails says so above the page (#live-status) until one succeeds: htmx
// leaves the part as it was, and a page that silently stopped following the scheduler looked
// current. Nothing else runs here: the pages work without script, only without live updates.
(function () {
  "use strict";
  const seen = new Map();
  let since = null;
  // Someone working in the live part (a keyboard focus in it, text selected there to copy, the
  // cancel question open) keeps it until they leave: swapping it sent the focus back to the
  // top of the page and dropped the selection every time the scheduler changed something.
  function keyboard(element) {
    try {
      return element.matches(":focus-visible");  // a click's focus is not: it would pin the part
    } catch (e) {
      return true;  // a browser without :focus-visible (Safari before 15.4)
    }
  }

  function inUse(part) {
    if (part.querySelector("details[open]")) {
      return true;  // a question asked (cancel this job?) stays until it is answered
    }
    const active = document.activeElement;
    if (active && active !== document.body && part.contains(active) && keyboard(active)) {
      return true;
    }
    const selection = document.getSelection();
    return Boolean(selection && !selection.isCollapsed && selection.rangeCount &&
      part.contains(selection.getRangeAt(0).commonAncestorContainer));
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    const detail = event.detail;
    const tag = detail.xhr.getResponseHeader("ETag");
    const key = detail.requestConfig.path;
    const polled = detail.requestConfig.elt && detail.requestConfig.elt.id === "live";
    if (polled && detail.xhr.status === 200 && inUse(detail.target)) {
      detail.shouldSwap = false;  // and its tag unrecorded: the next poll brings it again
      return;
    }
    if (tag && detail.requestConfig.verb === "get" && seen.get(key) === tag) {
      detail.shouldSwap = false;
      return;
    }
    if (tag) {
      seen.set(key, tag);
    }
  });

  function status(text) {
    const box = document.getElementById("live-status");
    if (!box) {
      return;
    }
    if (text === null) {
      since = null;
      box.hidden = true;
      box.textContent = "";
      return;
    }
    if (since === null) {
      since = new Date();
    }
    const at = since.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
    box.textContent = "Not updating: " + text + ". What you see is as of " + at +
      " (your clock); it updates again once the server answers.";
    box.hidden = false;
  }

  document.addEventListener("htmx:responseError", function (event) {
    const xhr = event.detail.xhr;
    let why = xhr.statusText || "";
    try {
      const shown = new DOMParser().parseFromString(xhr.responseText, "text/html")
        .querySelector(".error");
      if (shown && shown.textContent.trim()) {
        why = shown.textContent.trim();
      }
    } catch (e) {
      // not HTML: the status line says enough
    }
    status("the server answered " + xhr.status + (why ? " (" + why + ")" : ""));
  });
  document.addEventListener("htmx:sendError", function () {
    status("the server does not answer");
  });
  document.addEventListener("htmx:timeout", function () {
    status("the server did not answer in time");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) {
      status(null);
    }
  });
})();
