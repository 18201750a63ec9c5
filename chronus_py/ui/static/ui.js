// Live parts are polled with ETags: the browser revalidates (If-None-Match) and the server
// answers 304 when nothing changed; then the part is left alone instead of being swapped in
// again. Nothing else runs here: the pages work without script, only without live updates.
(function () {
  "use strict";
  const seen = new Map();
  document.addEventListener("htmx:beforeSwap", function (event) {
    const detail = event.detail;
    const tag = detail.xhr.getResponseHeader("ETag");
    const key = detail.requestConfig.path;
    if (tag && detail.requestConfig.verb === "get" && seen.get(key) === tag) {
      detail.shouldSwap = false;
      return;
    }
    if (tag) {
      seen.set(key, tag);
    }
  });
})();
