// connhost console: while an inbox page is open, ask the console every
// few seconds how many calls began to wait since the page was read, and
// announce them in the page's aria-live region. On the first page of the
// inbox (data-cards), the new calls that the page's filter keeps are
// shown at once: their cards, rendered by the console as a reload would
// render them, are inserted above the others. On a later page the notice
// links to the first. Without this script the page works the same; it
// only reloads by hand.
(function () {
  "use strict";
  var el = document.querySelector("[data-poll]");
  var live = document.getElementById("live");
  if (!el || !live || !window.fetch) return;
  var url = el.getAttribute("data-poll");
  var cards = el.getAttribute("data-cards");
  var every = parseInt(el.getAttribute("data-every"), 10) || 5000;
  var told = 0;
  function notice() {
    var p = document.getElementById("live-new");
    if (!p) {
      p = document.createElement("p");
      p.id = "live-new";
      p.className = "note";
      live.appendChild(p);
    }
    p.textContent = "";
    return p;
  }
  function calls(n, more) {
    return n + (more ? " or more" : "") + (n === 1 ? " new call waits" : " new calls wait");
  }
  // announce says how many calls began to wait, with a link to the page
  // that shows them: the first (a later page's own link to it), since a
  // later page's calls follow the pages before it.
  function announce(d) {
    var a = document.createElement("a");
    var first = document.getElementById("inbox-first");
    a.href = first ? first.getAttribute("href") : location.pathname + location.search;
    a.textContent = calls(d.new, d.more) + " — show them";
    notice().appendChild(a);
  }
  // insert puts the cards of doc (the console's answer) that the page
  // lacks above the page's first card, newest first, and says how many.
  function insert(doc, d) {
    var main = document.getElementById("main");
    var got = doc.querySelectorAll("section.card.approval");
    var box = document.getElementById("inbox-new");
    var added = 0;
    if (!box) {
      box = document.createElement("div");
      box.id = "inbox-new";
      var first = main.querySelector("section.card.approval");
      var empty = document.getElementById("inbox-empty");
      if (first) {
        first.parentNode.insertBefore(box, first);
      } else if (empty) {
        empty.parentNode.replaceChild(box, empty);
      } else {
        main.appendChild(box);
      }
    }
    var at = box.firstChild;
    for (var i = 0; i < got.length; i++) {
      if (document.getElementById(got[i].id)) continue;
      box.insertBefore(document.importNode(got[i], true), at);
      added++;
    }
    var bulk = doc.getElementById("bulk");
    if (added && bulk && !document.getElementById("bulk")) {
      box.parentNode.insertBefore(document.importNode(bulk, true), box.nextSibling);
    }
    var shown = box.querySelectorAll("section.card.approval").length;
    var p = notice();
    var text = calls(d.new, d.more);
    if (shown === d.new) {
      text += shown === 1 ? "; it is shown first on this page. " : "; they are shown first on this page. ";
    } else if (shown) {
      text += "; " + shown + " of them " + (shown === 1 ? "matches this page and is" : "match this page and are") + " shown first. ";
    } else {
      text += "; none of them matches this page. ";
    }
    p.appendChild(document.createTextNode(text));
    var a = document.createElement("a");
    a.href = location.pathname + location.search;
    a.textContent = "Reload to sort the page";
    p.appendChild(a);
  }
  function fresh(d) {
    if (!cards || !window.DOMParser) {
      announce(d);
      return null;
    }
    return fetch(cards, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) {
          announce(d);
          return;
        }
        insert(new DOMParser().parseFromString(html, "text/html"), d);
      });
  }
  function tick() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) {
        if (d && d.new > told) {
          told = d.new;
          return fresh(d);
        }
      })
      .catch(function () {})
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
