// probactr admin: optional enhancements; every page works without this script.
// 1. Times are shown in one zone (the user's choice, else the browser's), named in the
//    header; the tooltip holds the zone, the UTC value and the relative form ("3 min ago",
//    "in 12 s"), kept current. A trigger's instants show in its own zone too; filters
//    read times in the shown zone.
// 2. The trigger form previews the next instants as you type (the "Preview" button
//    does the same without JavaScript) and shows only the fields of the chosen kind.
// 3. The job form shows only the spec fieldset of the chosen kind (without JavaScript
//    every kind's fieldset shows, each labelled, and the server reads the chosen one), and
//    only the chosen schedule kind's fields. A form's error summary takes the focus.
// 4. The page of a running run follows its output live (server-sent events from the
//    API); without JavaScript it reloads every 5 s.
// 5. Lists that change (runs, the dashboard, the cluster) update in place: the page's
//    live regions are fetched again and swapped, never over what the user is typing or
//    has focused, with a toggle to pause; without JavaScript the page reloads.
// 6. Layout and tables (its own block, at the end): the navigation folds into a menu
//    button on narrow screens, and every table scrolls sideways in its own box.
(function () {
  "use strict";

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // The zone every time is shown in: the user's choice (account page), else the browser's.
  function shownZone() {
    var note = document.getElementById("time-zone");
    var chosen = note && note.getAttribute("data-time-zone");
    if (chosen) { return chosen; }
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch (e) { return "UTC"; }
  }

  // YYYY-MM-DD HH:MM:SS (or HH:MM when `minutes`) in `zone`, with the zone's short name.
  function zonedText(when, zone, minutes) {
    var parts = {};
    try {
      new Intl.DateTimeFormat("en-GB", {
        timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"
      }).formatToParts(when).forEach(function (p) { parts[p.type] = p.value; });
    } catch (e) { return utcText(when); }
    return parts.year + "-" + parts.month + "-" + parts.day + " " + parts.hour + ":" + parts.minute +
      (minutes ? "" : ":" + parts.second) + " " + parts.timeZoneName;
  }

  function utcText(when) {
    return when.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }

  // "in 12 s", "3 min ago", "2 h ago", "5 days ago": the largest whole unit.
  function relativeText(when, now) {
    var secs = Math.round((when.getTime() - now) / 1000);
    var size = Math.abs(secs);
    var units = [[86400, "days"], [3600, "h"], [60, "min"], [1, "s"]];
    var text = "now";
    for (var i = 0; i < units.length; i++) {
      if (size >= units[i][0]) {
        var count = Math.floor(size / units[i][0]);
        text = count + " " + (units[i][1] === "days" && count === 1 ? "day" : units[i][1]);
        break;
      }
    }
    if (text === "now") { return text; }
    return secs > 0 ? "in " + text : text + " ago";
  }

  // Every <time datetime> in the shown zone; one with `data-zone` (a trigger's instant) in
  // that zone first, then in the shown one when they differ. The tooltip names the zone,
  // the UTC value and the relative form.
  function localTimes(root) {
    var now = Date.now();
    var zone = shownZone();
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) { return; }
      var own = el.getAttribute("data-zone");
      var shown = zonedText(when, zone);
      var relative = relativeText(when, now);
      if (own && own !== zone) {
        el.textContent = zonedText(when, own) + " (" + own + ") · " + shown;
      } else {
        el.textContent = shown;
      }
      el.title = "Times in " + zone + " · " + utcText(when) + " · " + relative;
      el.setAttribute("data-relative", relative);
    });
    // Elements whose tooltip starts with an instant (the ledger's cells): the same.
    root.querySelectorAll("[data-at][title]").forEach(function (el) {
      var at = el.getAttribute("data-at");
      var when = new Date(at);
      if (isNaN(when.getTime())) { return; }
      var original = el.getAttribute("data-title") || el.title;
      var own = el.getAttribute("data-zone");
      var text = own && own !== zone ? zonedText(when, own) + " (" + own + ") · " + zonedText(when, zone) : zonedText(when, zone);
      el.setAttribute("data-title", original);
      el.title = original.replace(at, text);
    });
    zonedTitles(root, zone);
    var note = document.getElementById("time-zone");
    if (note) { note.textContent = "Times in " + zone; }
  }

  // Chart tooltips (SVG titles) carry "YYYY-MM-DD HH:MM UTC" from the server: shown in
  // the shown zone instead, the server's text kept to convert again after an update.
  function zonedTitles(root, zone) {
    root.querySelectorAll("svg title").forEach(function (title) {
      var original = title.getAttribute("data-utc") || title.textContent;
      var changed = original.replace(/(\d{4}-\d\d-\d\d) (\d\d:\d\d) UTC/g, function (all, day, time) {
        var when = new Date(day + "T" + time + ":00Z");
        return isNaN(when.getTime()) ? all : zonedText(when, zone, true);
      });
      if (changed !== original) {
        title.setAttribute("data-utc", original);
        title.textContent = changed;
      }
    });
  }

  // A filter form's zone-less times are read in the shown zone: the form sends it as
  // `tz`, and each time field names it.
  function zonedFilters(root) {
    var zone = shownZone();
    root.querySelectorAll("form").forEach(function (form) {
      var fields = form.querySelectorAll('input[type="datetime-local"]');
      if (fields.length === 0) { return; }
      var tz = form.querySelector('input[name="tz"]');
      if (!tz) {
        tz = document.createElement("input");
        tz.type = "hidden";
        tz.name = "tz";
        form.appendChild(tz);
      }
      tz.value = zone;
      fields.forEach(function (field) {
        field.title = "in " + zone;
        if (!field.nextElementSibling || !field.nextElementSibling.classList.contains("zone")) {
          var note = document.createElement("span");
          note.className = "zone muted";
          note.textContent = " " + zone;
          field.insertAdjacentElement("afterend", note);
        }
      });
    });
  }

  // Shows the fields of the kind chosen in the select `kindName` only (`only`: kind →
  // field names; every field of `all` shows without JavaScript, and a wrong one always).
  function fieldsOfKind(form, kindName, only, all, otherwise) {
    var kind = form.elements.namedItem(kindName);
    if (!kind) { return; }
    function apply() {
      var shown = only[kind.value] || otherwise;
      all.forEach(function (name) {
        var field = form.elements.namedItem(name);
        var box = field && field.closest(".field");
        if (box) { box.hidden = shown.indexOf(name) < 0 && !box.classList.contains("invalid"); }
      });
    }
    kind.addEventListener("change", apply);
    apply();
  }

  // The trigger form shows the fields of the chosen kind only.
  function kindFields(form) {
    var all = ["cron", "timezone", "interval_secs", "at"];
    fieldsOfKind(form, "kind", { cron: ["cron", "timezone"], interval: ["interval_secs"], once: ["at"] }, all, all);
  }

  // The job form: the fieldset of the chosen kind only. The others stay in the form,
  // hidden, so that switching back and forth keeps what was typed.
  function specFieldsets(form) {
    var kind = form.elements.namedItem("kind");
    var sets = form.querySelectorAll("fieldset.spec[data-kind]");
    if (!kind || sets.length === 0) { return; }
    function apply() {
      sets.forEach(function (set) { set.hidden = set.getAttribute("data-kind") !== kind.value; });
    }
    kind.addEventListener("change", apply);
    apply();
  }

  // The job form's schedule: the fields of the chosen kind only (none for "none").
  function scheduleFields(form) {
    fieldsOfKind(form, "schedule.kind",
      { cron: ["schedule.cron", "schedule.timezone"], interval: ["schedule.interval_secs"] },
      ["schedule.cron", "schedule.timezone", "schedule.interval_secs"], []);
  }

  function value(form, name) {
    var field = form.elements.namedItem(name);
    return field && field.value.trim() !== "" ? field.value.trim() : null;
  }

  function asTime(text) {
    if (!text) { return null; }
    return /[zZ]|[+-]\d\d:?\d\d$/.test(text) ? text : text + (text.length === 16 ? ":00Z" : "Z");
  }

  function livePreview(form) {
    var panel = document.getElementById("live-preview");
    var csrf = document.querySelector('meta[name="csrf-token"]');
    if (!panel || !csrf) { return; }
    var timer = null;
    function refresh() {
      var kind = value(form, "kind");
      var body = { kind: kind, timezone: value(form, "timezone") || "UTC", count: 5,
                   job_id: Number(form.getAttribute("data-job-id")),
                   start_at: asTime(value(form, "start_at")), end_at: asTime(value(form, "end_at")) };
      if (kind === "cron") { body.cron = value(form, "cron"); }
      if (kind === "interval") { body.interval_secs = Number(value(form, "interval_secs")); }
      if (kind === "once") { body.at = asTime(value(form, "at")); }
      fetch("/api/v1/schedule/preview", {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf.getAttribute("content") },
        body: JSON.stringify(body)
      }).then(function (response) { return response.json(); }).then(function (data) {
        var list = document.createElement("ol");
        list.className = "instants";
        if (data.instants) {
          data.instants.forEach(function (iso) {
            var item = document.createElement("li");
            var t = document.createElement("time");
            t.setAttribute("datetime", iso);
            if (kind === "cron") { t.setAttribute("data-zone", body.timezone); }
            t.textContent = iso;
            item.appendChild(t);
            list.appendChild(item);
          });
          if (data.instants.length === 0) { list.textContent = "This schedule has no instant left."; }
          if (data.resolved_cron) {
            var resolved = document.createElement("p");
            resolved.textContent = "H resolves to " + data.resolved_cron + " for this job.";
            panel.replaceChildren(resolved, list);
            localTimes(panel);
            return;
          }
        } else if (data.error) {
          var fields = data.error.fields || {};
          Object.keys(fields).forEach(function (field) {
            var item = document.createElement("li");
            item.className = "error";
            item.textContent = field + ": " + fields[field];
            list.appendChild(item);
          });
        }
        panel.replaceChildren(list);
        localTimes(panel);
      }).catch(function () { /* the Preview button still works */ });
    }
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(refresh, 300);
    });
    refresh();
  }

  // Appends output chunks to the run page as the run prints them; reloads the page
  // when the run ends, to show how it ended.
  function followOutput(pre) {
    if (pre.getAttribute("data-ended") === "true" || typeof EventSource === "undefined") { return; }
    var run = pre.getAttribute("data-run");
    var offset = pre.getAttribute("data-next-offset") || "0";
    var status = document.getElementById("output-status");
    var source = new EventSource("/api/v1/runs/" + run + "/output/stream?offset=" + encodeURIComponent(offset));
    var stickToEnd = true;
    pre.addEventListener("scroll", function () {
      stickToEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    });
    source.addEventListener("chunk", function (event) {
      var chunk = JSON.parse(event.data);
      var span = document.createElement("span");
      span.className = chunk.stream;
      span.textContent = chunk.text;
      pre.appendChild(span);
      pre.setAttribute("data-next-offset", event.lastEventId);
      if (stickToEnd) { pre.scrollTop = pre.scrollHeight; }
    });
    source.addEventListener("end", function () {
      source.close();
      pre.setAttribute("data-ended", "true");
      if (status) { status.textContent = "The run ended."; }
      setTimeout(function () { window.location.reload(); }, 1000);
    });
    source.addEventListener("error", function () {
      if (status && source.readyState === EventSource.CONNECTING) { status.textContent = "Reconnecting…"; }
    });
  }

  // Every `meta[name=live-refresh]` seconds, the page is fetched again and each element
  // with `data-live` and an id is replaced by its fresh copy, unless it holds the focus.
  function liveUpdates() {
    var meta = document.querySelector('meta[name="live-refresh"]');
    var secs = meta ? parseInt(meta.getAttribute("content"), 10) : 0;
    if (!(secs > 0) || !document.querySelector("[data-live][id]") || !window.fetch) { return; }
    var paused = false;
    var updates = 0;
    var toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "live-toggle";
    toggle.id = "live-toggle";
    function label() {
      toggle.textContent = paused ? "Resume live updates" : "Pause live updates";
      toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    }
    label();
    toggle.addEventListener("click", function () { paused = !paused; label(); });
    var heading = document.querySelector("main h1");
    if (heading) { heading.insertAdjacentElement("afterend", toggle); }
    function refresh() {
      if (paused || document.hidden) { return; }
      fetch(window.location.href, { credentials: "same-origin", headers: { accept: "text/html" } })
        .then(function (response) { return response.ok ? response.text() : null; })
        .then(function (html) {
          if (!html) { return; }
          var fresh = new DOMParser().parseFromString(html, "text/html");
          document.querySelectorAll("[data-live][id]").forEach(function (region) {
            var copy = fresh.getElementById(region.id);
            if (copy && !region.contains(document.activeElement)) {
              region.replaceWith(document.importNode(copy, true));
            }
          });
          localTimes(document);
          updates += 1;
          document.body.setAttribute("data-live-updates", String(updates));
        })
        .catch(function () { /* the next tick tries again */ });
    }
    window.setInterval(refresh, secs * 1000);
  }

  // Keeps a running run's progress (what its job last reported) up to date.
  function followProgress(dd) {
    var run = dd.getAttribute("data-run");
    var bar = dd.querySelector("progress");
    var text = dd.querySelector(".progress-text");
    function refresh() {
      fetch("/api/v1/runs/" + run, { credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (view) {
          // A run that ended reports no more; anything else (no report yet, a failed
          // read) is asked again.
          if (view && ["queued", "claimed", "running"].indexOf(view.state) < 0) { return; }
          var p = view && view.progress;
          if (p) {
            if (p.percent !== null && p.percent !== undefined) { bar.value = p.percent; }
            text.textContent = (p.percent !== null && p.percent !== undefined ? Math.round(p.percent) + "% " : "") + (p.message || "");
          }
          setTimeout(refresh, 2000);
        })
        .catch(function () { setTimeout(refresh, 5000); });
    }
    setTimeout(refresh, 2000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var output = document.getElementById("run-output");
    if (output) { followOutput(output); }
    var progress = document.getElementById("run-progress");
    if (progress) { followProgress(progress); }
    localTimes(document);
    zonedFilters(document);
    liveUpdates();
    // Relative forms age: refresh them while the page stays open.
    window.setInterval(function () { localTimes(document); }, 15000);
    var form = document.querySelector("form[data-live-preview]");
    if (form) { kindFields(form); livePreview(form); }
    var jobForm = document.querySelector("form[data-job-form]");
    if (jobForm) { specFieldsets(jobForm); scheduleFields(jobForm); }
    // A rejected form's summary of errors takes the focus, so that it is read first.
    var summary = document.getElementById("form-errors");
    if (summary) { summary.focus(); }
  });
})();

// The workflow form: its graph drawn from the step rows as they are typed (as the server
// draws it), a step row added without a round trip, and focus moved to an error summary.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var NODE_W = 160, NODE_H = 44, COLUMN = 210, ROW = 64, MARGIN = 12;

  function stepsOf(form) {
    var steps = [];
    form.querySelectorAll("tr.step-row").forEach(function (row) {
      var name = row.querySelector('[data-step-field="name"]').value.trim();
      if (!name) { return; }
      var job = row.querySelector('[data-step-field="job_id"]');
      var upstream = row.querySelector('[data-step-field="depends_on"]').value.split(",")
        .map(function (item) { return item.trim(); })
        .filter(function (item) { return item !== ""; });
      steps.push({
        name: name,
        job: job.selectedIndex > 0 ? job.options[job.selectedIndex].text : "",
        upstream: upstream
      });
    });
    return steps;
  }

  // Each step's column: one more than the deepest step it depends on (bounded rounds, so
  // a cycle being typed does not hang the page).
  function depths(steps) {
    var depth = {};
    for (var round = 0, changed = true; changed && round <= steps.length; round++) {
      changed = false;
      steps.forEach(function (step) {
        var wanted = 0;
        step.upstream.forEach(function (up) {
          if (depth[up] !== undefined) { wanted = Math.max(wanted, depth[up] + 1); }
        });
        if (depth[step.name] !== wanted) { depth[step.name] = wanted; changed = true; }
      });
    }
    return depth;
  }

  function node(tag, attributes, text) {
    var element = document.createElementNS(SVG, tag);
    Object.keys(attributes).forEach(function (key) { element.setAttribute(key, attributes[key]); });
    if (text !== undefined) { element.textContent = text; }
    return element;
  }

  function draw(form, target) {
    var steps = stepsOf(form), depth = depths(steps), rows = {}, place = {};
    var width = MARGIN, height = MARGIN;
    steps.forEach(function (step) {
      var column = depth[step.name] || 0;
      rows[column] = rows[column] || 0;
      place[step.name] = [MARGIN + column * COLUMN, MARGIN + rows[column] * ROW];
      rows[column] += 1;
      width = Math.max(width, place[step.name][0] + NODE_W + MARGIN);
      height = Math.max(height, place[step.name][1] + NODE_H + MARGIN);
    });
    var svg = node("svg", { "class": "dag", width: width, height: height,
      viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "workflow steps" });
    var marker = node("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
      markerWidth: 8, markerHeight: 8, orient: "auto" });
    marker.appendChild(node("path", { d: "M0,0 L10,5 L0,10 z" }));
    svg.appendChild(node("defs", {})).appendChild(marker);
    steps.forEach(function (step) {
      var to = place[step.name];
      step.upstream.forEach(function (up) {
        var from = place[up];
        if (!from) { return; }
        svg.appendChild(node("line", { "class": "edge", x1: from[0] + NODE_W, y1: from[1] + NODE_H / 2,
          x2: to[0], y2: to[1] + NODE_H / 2, "marker-end": "url(#arrow)" }));
      });
    });
    steps.forEach(function (step) {
      var at = place[step.name];
      var group = node("g", { "class": "step state-defined", "data-step": step.name });
      group.appendChild(node("rect", { x: at[0], y: at[1], width: NODE_W, height: NODE_H, rx: 6 }));
      group.appendChild(node("text", { x: at[0] + 10, y: at[1] + 18 }, step.name));
      group.appendChild(node("text", { "class": "state", x: at[0] + 10, y: at[1] + 35 }, step.job));
      svg.appendChild(group);
    });
    target.replaceChildren(svg);
  }

  // A copy of the last row, emptied and numbered as the next one.
  function addRow(form) {
    var rows = form.querySelectorAll("tr.step-row");
    var last = rows[rows.length - 1], index = rows.length;
    var row = last.cloneNode(true);
    row.setAttribute("data-row", index);
    row.querySelectorAll(".error").forEach(function (error) { error.remove(); });
    row.querySelectorAll(".invalid").forEach(function (cell) { cell.classList.remove("invalid"); });
    row.querySelectorAll("input, select, label").forEach(function (field) {
      ["name", "id", "for"].forEach(function (attribute) {
        var value = field.getAttribute(attribute);
        if (value === null) { return; }
        field.setAttribute(attribute, value.replace(/^steps\[\d+\]/, "steps[" + index + "]")
          .replace(/^step-\d+-/, "step-" + index + "-"));
      });
      field.removeAttribute("aria-invalid");
      field.removeAttribute("aria-describedby");
      if (field.tagName === "LABEL") {
        field.textContent = field.textContent.replace(/\d+/, String(index + 1));
      } else if (field.tagName === "INPUT") {
        field.value = "";
      } else if (field.getAttribute("data-step-field") === "job_id") {
        field.selectedIndex = 0;
      }
    });
    last.parentNode.appendChild(row);
    row.querySelector('[data-step-field="name"]').focus();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var summary = document.querySelector(".error-summary[role=alert]");
    if (summary) { summary.focus(); }
    var form = document.querySelector("form[data-workflow-form]");
    var target = document.getElementById("dag-preview");
    if (!form || !target) { return; }
    var redraw = function () { draw(form, target); };
    form.addEventListener("input", redraw);
    form.addEventListener("change", redraw);
    document.getElementById("add-step").addEventListener("click", function (event) {
      event.preventDefault();
      addRow(form);
    });
    redraw();
  });
})();

// Layout and tables: the narrow screens' menu button and the tables' scrolling boxes.
(function () {
  "use strict";

  // style.css folds the navigation only when this script can unfold it.
  document.documentElement.classList.add("js");

  function menuButton() {
    var header = document.querySelector("header.top");
    var button = header && header.querySelector(".menu-toggle");
    if (!button) { return; }
    button.hidden = false;
    function show(open) {
      header.classList.toggle("menu-open", open);
      button.setAttribute("aria-expanded", open ? "true" : "false");
    }
    button.addEventListener("click", function () { show(!header.classList.contains("menu-open")); });
    header.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && header.classList.contains("menu-open")) {
        show(false);
        button.focus();
      }
    });
  }

  // Wraps each table of `root` not yet wrapped in a box that scrolls sideways, so that a
  // wide table never widens the page.
  function wrapTables(root) {
    root.querySelectorAll("table").forEach(function (table) {
      var parent = table.parentElement;
      if (!parent || parent.classList.contains("table-wrap") || table.closest("td")) { return; }
      var box = document.createElement("div");
      box.className = "table-wrap";
      parent.insertBefore(box, table);
      box.appendChild(table);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    menuButton();
    var main = document.querySelector("main");
    if (!main) { return; }
    wrapTables(main);
    // Live updates swap regions for fresh copies: wrap theirs too.
    if (window.MutationObserver) {
      new MutationObserver(function () { wrapTables(main); }).observe(main, { childList: true, subtree: true });
    }
  });
})();
