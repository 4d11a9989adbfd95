/*
 * Keeps the admin's queue dashboard, task list and task page current without reloading them.
 *
 * No framework, no build step, as progress.js. An element with data-jobs-live ("dashboard",
 * "list" or "task") names its JSON endpoint (data-jobs-live-url, jobs.admin.live) and how often
 * to ask (data-jobs-live-interval, ms: JOBS_DASHBOARD_REFRESH_SECONDS). Each answer changes the
 * text of the elements that show a figure, and nothing else: a form being typed into, the focus
 * and the scroll stay as they are. Every value is set as text (textContent, setAttribute), never
 * parsed as HTML: task names, errors and queue names are whatever code gave them.
 *
 * Polling stops while the tab is hidden and resumes at once when it is shown again. When the
 * server errs or the database is down (503), the page says "Connection lost, retrying", keeps
 * its last figures and asks less and less often (doubling, up to a minute) until it answers.
 * Without JavaScript the page shows the figures of its rendering.
 */
(function () {
  "use strict";

  var MAX_DELAY = 60000;
  var SVG = "http://www.w3.org/2000/svg";

  // The rule of jobs.web.views.safe_link, as in progress.js: http(s) or relative links only.
  function safeLink(url) {
    if (typeof url !== "string" || /[\u0000-\u001f\u007f]/.test(url)) return null;
    url = url.trim();
    var scheme = /^([a-zA-Z][a-zA-Z0-9+.\-]*):/.exec(url);
    if (!url || (scheme && !/^https?$/i.test(scheme[1]))) return null;
    return url;
  }

  function setText(node, value) {
    value = value === null || value === undefined ? "" : String(value);
    if (node && node.textContent !== value) node.textContent = value;
  }

  function setAttr(node, name, value) {
    if (!node) return;
    if (value === null || value === undefined || value === "") node.removeAttribute(name);
    else if (node.getAttribute(name) !== String(value)) node.setAttribute(name, String(value));
  }

  function field(root, name) {
    return root.querySelector('[data-live="' + name + '"]');
  }

  function setList(list, lines) {
    if (!list) return;
    var key = JSON.stringify(lines || []);
    if (list.jobsLines === key) return;
    list.jobsLines = key;
    while (list.firstChild) list.removeChild(list.firstChild);
    (lines || []).forEach(function (line) {
      var item = document.createElement("li");
      item.textContent = line;
      list.appendChild(item);
    });
  }

  // A table of cells from jobs.admin.panels: rebuilt only when one of its cells changed.
  function setTable(root, name, rows) {
    var body = root.querySelector('[data-live-table="' + name + '"]');
    if (!body) return;
    var key = JSON.stringify(rows);
    if (body.jobsRows !== key) {
      body.jobsRows = key;
      while (body.firstChild) body.removeChild(body.firstChild);
      rows.forEach(function (cells) {
        var row = document.createElement("tr");
        cells.forEach(function (cell) {
          var td = document.createElement("td");
          td.className = cell.num ? "jobs-num" : "jobs-text";
          if (cell.title) td.title = cell.title;
          var holder = td;
          var href = cell.href ? safeLink(cell.href) : null;
          if (href) {
            holder = document.createElement("a");
            holder.href = href;
            td.appendChild(holder);
          }
          if (cell.code) {
            var code = document.createElement("code");
            holder.appendChild(code);
            holder = code;
          }
          holder.textContent = cell.text;
          row.appendChild(td);
        });
        body.appendChild(row);
      });
    }
    var box = body.closest(".jobs-table-box");
    if (box) box.hidden = rows.length === 0;
    var empty = root.querySelector('[data-live-empty="' + name + '"]');
    if (empty) empty.hidden = rows.length !== 0;
  }

  // The dashboard ------------------------------------------------------------------------------

  function updateQueueRow(row, queue) {
    setText(field(row, "name"), queue.name);
    var badge = field(row, "paused");
    if (badge) badge.hidden = !queue.paused;
    var counts = row.querySelectorAll('[data-live="count"]');
    queue.counts.forEach(function (pair, i) {
      if (!counts[i]) return;
      setText(counts[i], pair[0]);
      var href = safeLink(pair[1]);
      if (href) setAttr(counts[i], "href", href);
    });
    var oldest = field(row, "oldest");
    setText(oldest, queue.oldest);
    if (oldest) {
      oldest.className = "jobs-level jobs-level--" + queue.level;
      setAttr(oldest, "data-level", queue.level);
    }
    var last = field(row, "last_minute");
    setText(last, queue.last_minute);
    setAttr(last, "title", queue.per_minute_title);
    var line = row.querySelector(".jobs-sparkline polyline");
    setAttr(line, "points", queue.sparkline);
    setText(field(row, "run"), queue.run);
    setText(field(row, "wait"), queue.wait);
    var rate = field(row, "failure_rate");
    setText(rate, queue.failure_rate);
    setAttr(rate, "title", queue.failure_title);
    setText(field(row, "retries"), queue.retries_text);
    var resume = row.querySelector('button[value="resume"]');
    var pause = row.querySelector('button[value="pause"]');
    if (resume) resume.hidden = !queue.paused;
    if (pause) pause.hidden = queue.paused;
  }

  function newQueueRow(name) {
    var template = document.getElementById("jobs-queue-row");
    if (!template) return null;
    var row = template.content.querySelector("tr").cloneNode(true);
    row.setAttribute("data-queue", name);
    var input = row.querySelector('input[name="queue"]');
    if (input) input.value = name;
    return row;
  }

  function updateQueues(root, queues) {
    var body = root.querySelector("#jobs-queues tbody");
    if (!body) return;
    var rows = {};
    Array.prototype.forEach.call(body.querySelectorAll("tr[data-queue]"), function (row) {
      rows[row.getAttribute("data-queue")] = row; // compared as text: no selector is built
    });
    var seen = {};
    queues.forEach(function (queue, i) {
      seen[queue.name] = true;
      var row = Object.prototype.hasOwnProperty.call(rows, queue.name) ? rows[queue.name] : null;
      if (!row) row = newQueueRow(queue.name);
      if (!row) return;
      updateQueueRow(row, queue);
      // Moved only when out of place: moving a row would take the focus from its button.
      var wanted = body.querySelectorAll("tr[data-queue]")[i];
      if (wanted !== row) body.insertBefore(row, wanted || null);
    });
    Object.keys(rows).forEach(function (name) {
      if (!seen[name] && !rows[name].contains(document.activeElement)) {
        body.removeChild(rows[name]);
      }
    });
    var none = body.querySelector("[data-jobs-no-queue]");
    if (none) none.hidden = queues.length !== 0;
  }

  function updateChart(root, chart) {
    var svg = root.querySelector("svg.jobs-chart");
    if (!svg) return;
    setAttr(svg, "aria-label", chart.label);
    var rects = svg.querySelectorAll("rect");
    if (rects.length !== chart.bars.length) {
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      chart.bars.forEach(function () {
        var rect = document.createElementNS(SVG, "rect");
        rect.appendChild(document.createElementNS(SVG, "title"));
        svg.appendChild(rect);
      });
      rects = svg.querySelectorAll("rect");
    }
    chart.bars.forEach(function (bar, i) {
      ["x", "y", "width", "height"].forEach(function (name) {
        setAttr(rects[i], name, bar[name]);
      });
      setText(rects[i].querySelector("title"), bar.title);
    });
    setText(field(root, "throughput"), chart.totals);
    setText(field(root, "chart-span"), chart.span);
  }

  function updateBanner(root, banner) {
    var box = root.querySelector("[data-live-banner]");
    if (!box) return;
    box.className = "jobs-banner jobs-banner--" + banner.level;
    setAttr(box, "data-level", banner.level);
    setText(field(box, "banner-headline"), banner.headline);
    setList(box.querySelector('[data-live-list="banner-more"]'), banner.more);
    setList(box.querySelector('[data-live-list="banner-paused"]'), banner.paused);
  }

  function applyDashboard(root, data) {
    setText(field(root, "at"), data.at);
    updateBanner(root, data.banner);
    updateQueues(root, data.queues);
    updateChart(root, data.chart);
    setText(field(root, "held"), data.held);
    Object.keys(data.tables).forEach(function (name) {
      setTable(root, name, data.tables[name]);
    });
  }

  // The task list and the task page ----------------------------------------------------------

  function setBadge(holder, task) {
    if (!holder) return;
    var badge = holder.querySelector(".jobs-badge");
    if (!badge) {
      while (holder.firstChild) holder.removeChild(holder.firstChild);
      badge = document.createElement("span");
      holder.appendChild(badge);
    }
    var name = "jobs-badge jobs-badge--" + task.badge;
    if (badge.className !== name) badge.className = name;
    setText(badge, task.label);
  }

  function setCut(holder, text, whole) {
    if (!holder) return;
    setText(holder, text);
    setAttr(holder, "title", whole);
  }

  function listRows() {
    var rows = [];
    var boxes = document.querySelectorAll("#result_list tbody input.action-select");
    Array.prototype.forEach.call(boxes, function (box) {
      rows.push({ id: box.value, row: box.closest("tr") });
    });
    return rows;
  }

  function applyList(root, data) {
    listRows().forEach(function (item) {
      var task = Object.prototype.hasOwnProperty.call(data.tasks, item.id)
        ? data.tasks[item.id] : null;
      if (!task) {
        item.row.setAttribute("data-live-gone", "true"); // pruned or deleted since
        return;
      }
      setAttr(item.row, "data-status", task.status);
      var cell = function (name) { return item.row.querySelector(".field-" + name); };
      setBadge(cell("status_badge"), task);
      setCut(cell("progress_display"), task.progress, task.progress_title);
      setText(cell("attempts_display"), task.attempts);
      setText(cell("age"), task.age);
      setText(cell("run_time"), task.run_time);
    });
  }

  function applyTask(root, data) {
    var value = function (name) {
      return document.querySelector(".field-" + name + " .readonly");
    };
    document.body.setAttribute("data-status", data.status);
    setBadge(value("status_badge"), data);
    setCut(value("progress_display"), data.progress, data.progress_title);
    setText(value("attempts_display"), data.attempts);
    setText(value("last_error"), data.last_error || "\u2014");
    Object.keys(data.actions).forEach(function (name) {
      var item = document.querySelector('[data-live-action="' + name + '"]');
      if (item) item.hidden = !data.actions[name];
    });
  }

  // Polling ------------------------------------------------------------------------------------

  var APPLY = { dashboard: applyDashboard, list: applyList, task: applyTask };

  function Poller(root) {
    this.root = root;
    this.apply = APPLY[root.getAttribute("data-jobs-live")];
    this.url = root.getAttribute("data-jobs-live-url");
    this.interval = parseInt(root.getAttribute("data-jobs-live-interval"), 10) || 10000;
    this.delay = this.interval;
    this.timer = null;
    this.stopped = false;
    this.updates = 0;
    this.status = root.hasAttribute("data-jobs-live-status")
      ? root : root.querySelector("[data-jobs-live-status]");
  }

  Poller.prototype.address = function () {
    if (this.apply !== applyList) return this.url;
    var query = listRows().map(function (item) {
      return "id=" + encodeURIComponent(item.id);
    });
    return this.url + "?" + query.join("&");
  };

  Poller.prototype.say = function (text, lost) {
    setText(this.status, text);
    if (this.status) this.status.classList.toggle("jobs-live-status--lost", !!lost);
    this.root.setAttribute("data-jobs-live-state", lost ? "lost" : (text ? "stopped" : "live"));
  };

  Poller.prototype.schedule = function (ms) {
    var self = this;
    clearTimeout(this.timer);
    this.timer = null;
    if (this.stopped || document.hidden) return; // shown again: visibilitychange polls
    this.timer = setTimeout(function () { self.tick(); }, ms);
  };

  Poller.prototype.stop = function (text) {
    this.stopped = true;
    clearTimeout(this.timer);
    this.say(text, false);
  };

  Poller.prototype.tick = function () {
    var self = this;
    if (this.busy) return;
    this.busy = true;
    fetch(this.address(), {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    })
      .then(function (response) {
        var type = response.headers.get("Content-Type") || "";
        // Sent to the login page: the session ended (or the user lost the admin).
        if (response.redirected || type.indexOf("application/json") !== 0) return { login: true };
        if (response.status === 403) return { refused: true };
        if (response.status === 404) return { gone: true };
        if (!response.ok) throw new Error("status " + response.status);
        return response.json();
      })
      .then(function (data) {
        self.busy = false;
        if (data.login) return self.stop("Logged out: reload the page to log in again.");
        if (data.refused) return self.stop("You may no longer view tasks.");
        if (data.gone) return self.stop("This task no longer exists.");
        self.apply(self.root, data);
        self.updates += 1;
        self.root.setAttribute("data-jobs-live-updates", String(self.updates));
        self.delay = self.interval;
        self.say("", false);
        self.schedule(self.interval);
      })
      .catch(function () {
        // The server errs or the database is down: keep the figures, ask less often.
        self.busy = false;
        self.delay = Math.min(self.delay * 2, MAX_DELAY);
        self.say("Connection lost, retrying in " + Math.round(self.delay / 1000) + " s; " +
          "the figures are the last ones read.", true);
        self.schedule(self.delay);
      });
  };

  function start() {
    var roots = document.querySelectorAll("[data-jobs-live]");
    Array.prototype.forEach.call(roots, function (root) {
      if (root.jobsPoller) return;
      var poller = new Poller(root);
      if (!poller.apply || !poller.url) return;
      root.jobsPoller = poller;
      poller.say("", false);
      document.addEventListener("visibilitychange", function () {
        if (document.hidden) {
          clearTimeout(poller.timer);
          poller.timer = null;
        } else if (!poller.stopped && !poller.busy) {
          poller.tick(); // back in sight: what changed meanwhile, at once
        }
      });
      poller.schedule(poller.interval);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
