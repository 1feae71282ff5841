// Live refresh of the dashboard: every element with `data-live="<ms>"` and
// `data-live-src="<url>"` is replaced, every <ms> milliseconds, by the element with the same
// id in a fresh copy of that page. Refreshing stops for an element once the fresh copy no
// longer marks it live (a registration that finished, for instance).
"use strict";
(function () {
  function schedule(id, delay) {
    window.setTimeout(function () { refresh(id); }, delay);
  }
  function refresh(id) {
    var el = document.getElementById(id);
    if (!el || !el.dataset.live) { return; }
    var delay = parseInt(el.dataset.live, 10) || 2000;
    fetch(el.dataset.liveSrc, { credentials: "same-origin", headers: { "accept": "text/html" } })
      .then(function (r) {
        // Signed out (the session expired): show the sign-in page.
        if (r.redirected) { window.location.reload(); throw new Error("signed out"); }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById(id);
        if (!fresh) { return; }
        var current = document.getElementById(id);
        if (current) { current.replaceWith(document.importNode(fresh, true)); }
        if (fresh.dataset.live) { schedule(id, delay); }
      })
      .catch(function () { schedule(id, delay * 2); });
  }
  function start() {
    document.querySelectorAll("[data-live][data-live-src][id]").forEach(function (el) {
      schedule(el.id, parseInt(el.dataset.live, 10) || 2000);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
