// connhost console: keyboard shortcuts. j and k move to the next and the
// previous call on the page; a and r open a dialog that asks to confirm
// approving or rejecting that call (with the decision form's reason), and
// only the dialog's confirm button, or Enter in it, decides: no key alone
// ever decides. ? lists the shortcuts. They are off while a field, a
// button or a dialog has the keyboard, and with Ctrl, Alt or Meta held.
// A call is approved or rejected only through the buttons the console
// rendered on the page, so a principal who may not decide has none to
// press. Each move and dialog is announced in the page's aria-live region.
// Without this script the page works the same, by its forms.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  if (!main || !live || !window.HTMLDialogElement) return;
  var CALLS = "section.card.approval, section.card.uncertain, #decide";
  var current = null;

  function calls() { return main.querySelectorAll(CALLS); }
  // An inbox empty at load may show calls later (live.js inserts them):
  // its shortcuts stay, and their hint follows what the page holds.
  var inbox = document.getElementById("inbox");
  if (!calls().length && !inbox) return;

  function say(text) {
    var p = document.getElementById("keys-said");
    if (!p) {
      p = document.createElement("p");
      p.id = "keys-said";
      p.className = "note";
      live.appendChild(p);
    }
    p.textContent = text;
  }
  function formOf(card, verb) {
    return card && card.querySelector('form.decide[action$="/' + verb + '"]');
  }
  function decides() {
    return !!main.querySelector('form.decide[action$="/approve"], form.decide[action$="/reject"]');
  }
  // name is what a call is called when announced: its tool and its id.
  function name(card) {
    var tool = card.querySelector(".tool");
    var id = card.id === "decide" ? "" : card.id;
    if (!tool) {
      var h1 = document.querySelector("main h1");
      return h1 ? h1.textContent.trim() : "this call";
    }
    return tool.textContent + (id ? " " + id : "");
  }

  function hint() {
    var p = document.getElementById("keys-hint");
    if (!p) {
      p = document.createElement("p");
      p.className = "hint keys-hint";
      p.id = "keys-hint";
      var h1 = main.querySelector("h1");
      main.insertBefore(p, h1 ? h1.nextSibling : main.firstChild);
    }
    var text = "Keyboard: j and k move between calls" +
      (decides() ? ", a approves and r rejects the call after you confirm" : "") +
      "; ? lists the shortcuts.";
    // Unchanged text is not written again: the observer below would see
    // the write and call this again.
    if (p.textContent !== text) p.textContent = text;
  }

  function move(by) {
    var list = calls();
    if (!list.length) {
      say("No call on this page yet.");
      return;
    }
    var i = Array.prototype.indexOf.call(list, current);
    if (i < 0) {
      i = by > 0 ? 0 : list.length - 1;
    } else {
      i = Math.max(0, Math.min(list.length - 1, i + by));
    }
    select(list[i], i, list.length);
  }
  function select(card, i, n) {
    if (current) current.classList.remove("current");
    current = card;
    card.classList.add("current");
    if (!card.hasAttribute("tabindex")) card.setAttribute("tabindex", "-1");
    card.focus();
    card.scrollIntoView({ block: "nearest" });
    var can = [];
    if (formOf(card, "approve")) can.push("a to approve");
    if (formOf(card, "reject")) can.push("r to reject");
    say("Call " + (i + 1) + " of " + n + ": " + name(card) + (can.length ? "; " + can.join(", ") + "." : "."));
  }
  // target is the call a and r act on: the one j or k chose, else the
  // one the keyboard's focus is in, else the page's only one.
  function target() {
    if (current && main.contains(current)) return current;
    var list = calls();
    for (var i = 0; i < list.length; i++) {
      if (list[i].contains(document.activeElement)) return list[i];
    }
    return list.length === 1 ? list[0] : null;
  }

  function dialog(id, title) {
    var d = document.createElement("dialog");
    d.id = id;
    d.className = "keys";
    d.setAttribute("aria-labelledby", id + "-title");
    var h = document.createElement("h2");
    h.id = id + "-title";
    h.textContent = title;
    d.appendChild(h);
    d.addEventListener("close", function () {
      d.remove();
      if (current) current.focus();
    });
    document.body.appendChild(d);
    return d;
  }

  // confirm asks, in a modal dialog, to approve or reject card's call;
  // only its confirm button (or Enter in its reason field) submits the
  // card's own decision form, with the reason given here.
  function confirm(card, verb) {
    var form = formOf(card, verb);
    if (!form) {
      if (!card) {
        say("Choose a call first: j moves to the next, k to the previous.");
      } else if (card.querySelector(".folded-call") && formOf(card, verb === "approve" ? "reject" : "approve")) {
        // The card holds a decision form, so the role is there: the call
        // is too long for the inbox and is approved from its own page.
        say(name(card) + " is too long for the inbox: review it whole on its own page (the card's link) to " + verb + " it there.");
      } else {
        say("You may not " + verb + " " + name(card) + " here: that needs the approver role.");
      }
      return;
    }
    var button = form.querySelector("button[type=submit]");
    var d = dialog("keys-confirm", (verb === "approve" ? "Approve " : "Reject ") + name(card) + "?");
    var what = document.createElement("p");
    var money = card.querySelector(".money");
    what.textContent = (money ? money.textContent + ". " : "") +
      (verb === "approve" ? "The call runs once its runtime sends it again." : "The call will not run.");
    d.appendChild(what);
    var f = document.createElement("form");
    f.method = "dialog";
    var label = document.createElement("label");
    label.textContent = verb === "approve" ? "Reason for approving" : "Reason for rejecting";
    var reason = document.createElement("input");
    reason.type = "text";
    reason.name = "reason";
    reason.maxLength = 500;
    reason.id = "keys-reason";
    var given = form.querySelector("input[name=reason]");
    if (given) reason.value = given.value;
    label.appendChild(reason);
    f.appendChild(label);
    var row = document.createElement("div");
    row.className = "actions";
    var yes = document.createElement("button");
    yes.type = "submit";
    yes.value = "confirm";
    yes.id = "keys-confirm-yes";
    yes.className = verb;
    yes.textContent = button ? button.textContent : verb;
    var no = document.createElement("button");
    no.type = "submit";
    no.value = "cancel";
    no.id = "keys-confirm-no";
    no.textContent = "Cancel";
    row.appendChild(yes);
    row.appendChild(no);
    f.appendChild(row);
    d.appendChild(f);
    d.addEventListener("close", function () {
      if (d.returnValue !== "confirm") {
        say("Nothing decided: " + name(card) + " still waits.");
        return;
      }
      if (given) given.value = reason.value;
      say((verb === "approve" ? "Approving " : "Rejecting ") + name(card) + "…");
      if (form.requestSubmit) form.requestSubmit(button); else form.submit();
    });
    d.showModal();
    // The dialog's title has the focus (a screen reader reads it) until
    // the key that opened it is released: only then the reason field, so
    // that the key's own character never lands in it.
    var title = d.querySelector("h2");
    title.setAttribute("tabindex", "-1");
    title.focus();
    document.addEventListener("keyup", function up() {
      document.removeEventListener("keyup", up);
      if (d.open && document.activeElement === title) reason.focus();
    });
  }

  function help() {
    var d = dialog("keys-help", "Keyboard shortcuts");
    var dl = document.createElement("dl");
    dl.className = "facts";
    var rows = [["j", "the next call"], ["k", "the previous call"]];
    if (decides()) {
      rows.push(["a", "approve the call, after you confirm in a dialog"]);
      rows.push(["r", "reject the call, after you confirm in a dialog"]);
    }
    rows.push(["?", "this list"], ["Escape", "close a dialog; nothing is decided"]);
    rows.forEach(function (r) {
      var dt = document.createElement("dt");
      var k = document.createElement("kbd");
      k.textContent = r[0];
      dt.appendChild(k);
      var dd = document.createElement("dd");
      dd.textContent = r[1];
      dl.appendChild(dt);
      dl.appendChild(dd);
    });
    d.appendChild(dl);
    if (!decides()) {
      var p = document.createElement("p");
      p.textContent = "No call on this page has approve or reject buttons for you: approving and rejecting need the approver role.";
      d.appendChild(p);
    }
    var f = document.createElement("form");
    f.method = "dialog";
    var close = document.createElement("button");
    close.type = "submit";
    close.textContent = "Close";
    f.appendChild(close);
    d.appendChild(f);
    d.showModal();
    close.focus();
    say("Keyboard shortcuts listed in a dialog; Escape closes it.");
  }

  // typing reports whether a key goes to something that takes letters
  // of its own (a field, an open dialog) or is held with a modifier.
  function typing(e) {
    if (e.ctrlKey || e.altKey || e.metaKey || e.isComposing) return true;
    if (document.querySelector("dialog[open]")) return true;
    var t = e.target;
    if (!t || !t.tagName) return false;
    return t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName);
  }

  document.addEventListener("keydown", function (e) {
    if (typing(e)) return;
    switch (e.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a": confirm(target(), "approve"); break;
      case "r": confirm(target(), "reject"); break;
      case "?": help(); break;
      default: return;
    }
    e.preventDefault();
  });
  hint();
  if (inbox && window.MutationObserver) {
    new MutationObserver(hint).observe(main, { childList: true, subtree: true });
  }
})();
