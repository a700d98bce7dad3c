// connhost console: while an inbox page is open, ask the console every
// few seconds how many calls began to wait since the page was read, and
// announce them in the page's aria-live region with a link that shows
// them. Without this script the page works the same; it only reloads by
// hand.
(function () {
  "use strict";
  var el = document.querySelector("[data-poll]");
  var live = document.getElementById("live");
  if (!el || !live || !window.fetch) return;
  var url = el.getAttribute("data-poll");
  var every = parseInt(el.getAttribute("data-every"), 10) || 5000;
  var told = 0;
  function announce(d) {
    var p = document.getElementById("live-new");
    if (!p) {
      p = document.createElement("p");
      p.id = "live-new";
      p.className = "note";
      live.appendChild(p);
    }
    var a = document.createElement("a");
    a.href = location.pathname + location.search;
    a.textContent = d.new + (d.more ? " or more" : "") +
      (d.new === 1 ? " new call waits" : " new calls wait") + " — show them";
    p.textContent = "";
    p.appendChild(a);
  }
  function tick() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) {
        if (d && d.new > told) {
          told = d.new;
          announce(d);
        }
      })
      .catch(function () {})
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
