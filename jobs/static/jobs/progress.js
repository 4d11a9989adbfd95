/*
 * Keeps every {% task_progress %} block on the page up to date by polling its JSON status view.
 *
 * No framework, no build step. Polls about every 2 seconds, backs off (doubling up to 30 s) on
 * network or server errors, stops at a terminal status, and turns the retry / cancel form into
 * a background request. Without JavaScript the block shows the state as of the page's rendering
 * and the buttons post the form normally.
 *
 * Each update also dispatches a "jobs:status" event on the block (detail: the JSON status), for
 * pages that show more than the bar.
 */
(function () {
  "use strict";

  var INTERVAL = 2000;
  var MAX_INTERVAL = 30000;

  // The link rule of jobs.views.safe_link: http(s) or relative, never javascript:, data:...
  // Browsers drop tabs and newlines inside a URL and spaces around it, so a URL with a control
  // character is refused and the scheme is read after trimming.
  function safeLink(url) {
    if (typeof url !== "string" || /[\u0000-\u001f\u007f]/.test(url)) return null;
    url = url.trim();
    var scheme = /^([a-zA-Z][a-zA-Z0-9+.\-]*):/.exec(url);
    if (!url || (scheme && !/^https?$/i.test(scheme[1]))) return null;
    return url;
  }

  function setText(root, name, text) {
    var node = root.querySelector('[data-jobs-field="' + name + '"]');
    if (node) node.textContent = text;
  }

  function render(root, status) {
    var percent = status.progress.percent;
    var bar = root.querySelector('[role="progressbar"]');
    var fill = root.querySelector("[data-jobs-bar]");
    if (percent === null) {
      bar.removeAttribute("aria-valuenow");
    } else {
      bar.setAttribute("aria-valuenow", String(percent));
    }
    bar.setAttribute(
      "aria-valuetext",
      (percent === null ? "" : percent + "% · ") + status.message
    );
    if (fill) fill.style.width = (percent || 0) + "%";

    var shown = (status.cancel_requested && !status.is_finished) ? "cancelling" : status.status;
    var announce = root.querySelector("[data-jobs-announce]");
    if (announce && root.getAttribute("data-announced") !== shown) {
      // Only a change of state is spoken; the state rendered with the page is not.
      if (root.getAttribute("data-announced") !== null) {
        var label = root.querySelector('[role="progressbar"]').getAttribute("aria-label") || "";
        announce.textContent = label.replace(/^Progress of /, "") + ": " +
          (shown === "cancelling" ? "Cancelling" : status.status_display) + ". " + status.message;
      }
      root.setAttribute("data-announced", shown);
    }
    root.className = root.className.replace(/\bjobs-status-\w+/g, "").trim();
    root.classList.add("jobs-status-" + status.status);
    root.setAttribute("data-status", status.status);
    root.setAttribute("data-finished", status.is_finished ? "true" : "false");
    var cancelling = status.cancel_requested && !status.is_finished;
    setText(root, "status_display", cancelling ? "Cancelling" : status.status_display);
    setText(root, "percent", percent === null ? "" : percent + "%");
    setText(root, "message", status.message);
    // Worded by the server (jobs.humanize.remaining_text): one formatter, one wording.
    setText(root, "eta", status.eta_text || "");
    var eta = root.querySelector('[data-jobs-field="eta"]');
    if (eta) eta.hidden = !status.eta_text;

    var link = root.querySelector("[data-jobs-result-link]");
    var url = status.result ? safeLink(status.result.url) : null;
    if (link && url) {
      link.href = url;
      link.textContent = status.result.label || "Download the result";
      link.hidden = false;
    } else if (link && status.result) {
      link.removeAttribute("href"); // a result whose url is unsafe gets no link at all
      link.hidden = true;
    }
    var retry = root.querySelector("[data-jobs-retry]");
    var cancel = root.querySelector("[data-jobs-cancel]");
    if (retry) retry.hidden = !status.can_retry;
    if (cancel) cancel.hidden = !status.can_cancel;
    root.dispatchEvent(new CustomEvent("jobs:status", { detail: status, bubbles: true }));
  }

  function Poller(root) {
    this.root = root;
    this.url = root.getAttribute("data-status-url");
    this.delay = INTERVAL;
    this.timer = null;
  }

  Poller.prototype.schedule = function (ms) {
    var self = this;
    clearTimeout(this.timer);
    this.timer = setTimeout(function () { self.tick(); }, ms);
  };

  Poller.prototype.tick = function () {
    var self = this;
    fetch(this.url, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    })
      .then(function (response) {
        if (response.status === 404) return { gone: true };
        if (!response.ok) throw new Error("status " + response.status);
        return response.json();
      })
      .then(function (status) {
        if (status.gone) {
          setText(self.root, "message", "This task is no longer available.");
          return;
        }
        self.delay = INTERVAL;
        self.update(status);
      })
      .catch(function () {
        // The server or the network is struggling: ask less often until it answers again.
        self.delay = Math.min(self.delay * 2, MAX_INTERVAL);
        self.schedule(self.delay);
      });
  };

  Poller.prototype.update = function (status) {
    render(this.root, status);
    if (!status.is_finished) this.schedule(INTERVAL);
  };

  Poller.prototype.act = function (form, action) {
    var self = this;
    var data = new FormData(form);
    data.delete("next"); // ask for JSON, not a redirect
    data.set("action", action);
    var token = data.get("csrfmiddlewaretoken") || "";
    // getAttribute: the buttons are named "action", which shadows form.action in the DOM.
    fetch(form.getAttribute("action"), {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": token },
    })
      .then(function (response) { return response.json(); })
      .then(function (status) {
        if (status.id) self.update(status);
        if (status.action_message) setText(self.root, "message", status.action_message);
      })
      .catch(function () { self.schedule(INTERVAL); });
  };

  function bind(root) {
    if (root.getAttribute("data-jobs-bound")) return;
    root.setAttribute("data-jobs-bound", "1");
    var poller = new Poller(root);
    var form = root.querySelector("[data-jobs-actions]");
    if (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var button = event.submitter;
        poller.act(form, button ? button.value : "");
      });
    }
    // The server says whether the status is final (jobs.states.TERMINAL): no list of names here.
    if (root.getAttribute("data-finished") !== "true") {
      poller.schedule(INTERVAL);
    }
  }

  function start() {
    var roots = document.querySelectorAll("[data-jobs-task]");
    for (var i = 0; i < roots.length; i++) bind(roots[i]);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
