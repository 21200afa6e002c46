"""The CSS and JavaScript of the walk view (see `_html`): no external resources.

The walk page inlines both; the server's console (`decisionrag._serve._ui`) serves the same
two as files and draws a walk with ``DecisionRAGWalk.render(container, data)``, where the page
binds its static HTML with ``DecisionRAGWalk.mount``.
"""

STYLE = """
:root { --fg:#1d232b; --muted:#5f6b7a; --bg:#fbfbfc; --card:#fff; --line:#d9dee5;
  --kept:#2f7d4f; --opened:#1f6fb2; --pruned:#b9c1cc; --reopened:#c77800; --bad:#c62828; }
@media (prefers-color-scheme: dark) {
  :root { --fg:#e6e9ee; --muted:#9aa5b4; --bg:#14171c; --card:#1c2027; --line:#343b46;
    --pruned:#4a5260; }
}
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width:1180px; margin:0 auto; padding:20px 24px 60px; }
h1 { font-size:22px; margin:4px 0 6px; } h2 { font-size:17px; margin:26px 0 8px; }
.brand { color:var(--muted); font-size:12px; letter-spacing:.06em; text-transform:uppercase; margin:0; }
.context, .muted { color:var(--muted); } .history { color:var(--muted); padding-left:20px; }
.totals { font-weight:600; }
input[type=search], .stage-filter { width:100%; padding:8px 10px; border:1px solid var(--line);
  border-radius:6px; background:var(--card); color:var(--fg); font:inherit; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:4px 16px 14px;
  margin-top:16px; }
.answer-text { font-size:16px; white-space:pre-wrap; }
.cite { font-weight:600; color:var(--opened); text-decoration:none; padding:0 1px; }
.cite.invalid { color:var(--bad); text-decoration:line-through; cursor:help; }
.warning { color:var(--bad); font-weight:600; }
ol.tree { list-style:none; margin:0; padding:0 0 0 14px; border-left:2px solid var(--line); }
ol.tree > li { position:relative; margin:6px 0; }
ol.tree > li::before { content:""; position:absolute; left:-14px; top:14px; width:12px;
  border-top:2px solid var(--line); }
ol.tree > li.leaf { color:var(--muted); padding:4px 0; }
details.stage > summary { cursor:pointer; padding:6px 8px; border-radius:6px; list-style:none;
  display:flex; flex-wrap:wrap; gap:4px 14px; align-items:center; }
details.stage > summary::-webkit-details-marker { display:none; }
details.stage > summary::before { content:"▸"; color:var(--muted); }
details.stage[open] > summary::before { content:"▾"; }
details.stage > summary:hover { background:rgba(127,127,127,.08); }
.stage-name { font-weight:700; min-width:120px; } .cost { color:var(--muted); font-size:12px; }
b.kept { color:var(--kept); } b.reopened { color:var(--reopened); }
.share { display:inline-flex; width:160px; height:8px; background:var(--pruned); border-radius:4px;
  overflow:hidden; } .share i { display:block; height:100%; }
.share i.kept { background:var(--kept); } .share i.reopened { background:var(--reopened); }
.share i.pruned { background:var(--pruned); }
.matches { color:var(--opened); font-weight:600; font-size:12px; }
.body { padding:4px 0 8px 14px; }
.controls { display:flex; gap:8px; margin:6px 0; } .controls select { font:inherit; }
table.cands { width:100%; border-collapse:collapse; table-layout:fixed; }
table.cands td { border-top:1px solid var(--line); padding:3px 6px; vertical-align:top; overflow:hidden; }
table.cands th { padding:2px 6px; text-align:left; font-weight:600; font-size:11px; color:var(--muted); }
table.cands .p { width:58px; text-align:right; font-variant-numeric:tabular-nums; }
table.cands .barcell { width:130px; } table.cands .st { width:86px; } table.cands .via { width:24%;
  color:var(--muted); font-size:12px; }
.bar { display:inline-block; width:120px; height:9px; background:rgba(127,127,127,.15); border-radius:4px;
  overflow:hidden; vertical-align:middle; } .bar i { display:block; height:100%; background:var(--opened); }
tr.status-kept .bar i { background:var(--kept); } tr.status-pruned .bar i { background:var(--pruned); }
tr.status-reopened .bar i { background:var(--reopened); }
tr.status-pruned td.label { color:var(--muted); }
.badge { font-size:11px; padding:1px 6px; border-radius:9px; border:1px solid currentColor; }
.badge.opened { color:var(--opened); } .badge.kept { color:var(--kept); }
.badge.pruned { color:var(--muted); } .badge.reopened { color:var(--reopened); }
td.label code, .hit code { color:var(--muted); font-size:11px; margin-left:6px; }
a.rank-link { font-size:11px; margin-left:6px; color:var(--opened); }
.more { margin:6px 0; color:var(--muted); } button { font:inherit; cursor:pointer; }
ol.hits { padding-left:0; list-style:none; }
li.hit { border-top:1px solid var(--line); padding:8px 6px; }
li.hit:target, li.hit.flash { background:rgba(31,111,178,.12); outline:2px solid var(--opened); }
li.hit.cited .rank { color:var(--opened); }
.hit-head .rank { font-weight:700; } .path { font-weight:600; } .hit-head .page { color:var(--muted); }
.metrics { display:flex; gap:16px; color:var(--muted); font-size:12px; margin:2px 0; }
.metrics .bar { width:80px; }
.meta { display:inline-block; font-size:11px; background:rgba(127,127,127,.12); border-radius:4px;
  padding:0 6px; margin:2px 4px 0 0; }
.text { margin:4px 0 0; white-space:pre-wrap; }
.walk-buttons { display:flex; gap:8px; margin:4px 0 8px; }
.sr-only { position:absolute; width:1px; height:1px; padding:0; margin:-1px; overflow:hidden;
  clip:rect(0,0,0,0); white-space:nowrap; border:0; }
details.legend { margin:4px 0 8px; color:var(--muted); }
details.legend > summary { cursor:pointer; font-weight:600; color:var(--fg); }
details.legend ul { margin:4px 0; padding-left:20px; } details.legend li { margin:2px 0; }
details.legend .badge { font-size:10px; }
:focus-visible { outline:2px solid var(--opened); outline-offset:2px; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var PAGE = 200;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function number(n) { return Number(n).toLocaleString("en-US"); }

  function matches(row, q) {
    if (!q) return true;
    return row[0].toLowerCase().indexOf(q) >= 0 || row[1].toLowerCase().indexOf(q) >= 0 ||
      row[4].toLowerCase().indexOf(q) >= 0;
  }

  function wanted(row, status) {
    return status === "all" || row[3] === status || (status === "kept" && row[3] === "opened");
  }

  // One stage's summary line, as the walk page writes it in HTML (_html._stage_summary).
  function summary(stage, index) {
    var details = el("details", "stage");
    var data = { stage: index, name: stage.name, candidates: stage.n_candidates, kept: stage.kept,
      pruned: stage.pruned, reopened: stage.reopened };
    Object.keys(data).forEach(function (key) { details.setAttribute("data-" + key, data[key]); });
    var line = el("summary");
    line.appendChild(el("span", "stage-name", stage.name));
    line.appendChild(document.createTextNode(" "));
    var counts = el("span", "counts", number(stage.n_candidates) + " candidates · ");
    counts.appendChild(el("b", "kept", stage.kept + " kept"));
    counts.appendChild(document.createTextNode(" · " + number(stage.pruned) + " pruned"));
    if (stage.reopened) {
      counts.appendChild(document.createTextNode(" · "));
      counts.appendChild(el("b", "reopened", stage.reopened + " reopened"));
    }
    line.appendChild(counts);
    line.appendChild(document.createTextNode(" "));
    line.appendChild(el("span", "cost", stage.requests + " req · " + number(stage.input_tokens) +
      " tok · " + stage.seconds.toFixed(2) + " s + " + stage.local_seconds.toFixed(2) + " s local"));
    var share = el("span", "share");
    var n = Math.max(1, stage.n_candidates);
    var outside = stage.reopened_not_kept;
    [[stage.kept, "kept"], [outside, "reopened"], [Math.max(0, stage.pruned - outside), "pruned"]]
      .forEach(function (part) {
        if (!part[0]) return;
        var bar = el("i", part[1]);
        bar.style.width = (100 * part[0] / n).toFixed(2) + "%";
        share.appendChild(bar);
      });
    line.appendChild(share);
    line.appendChild(el("span", "matches"));
    details.appendChild(line);
    details.appendChild(el("div", "body"));
    var item = el("li");
    item.appendChild(details);
    return item;
  }

  // The walk drawn into `container` from its data ({stages, hits}): a search box, the
  // expand/collapse buttons and the stages (for a view with no static HTML of its own).
  function render(container, data) {
    container.textContent = "";
    var label = el("label", "sr-only", "Search every candidate of the walk");
    var search = el("input", "walk-search");
    search.type = "search";
    search.placeholder = "Search every candidate (title, text or id)…";
    search.autocomplete = "off";
    search.id = (container.id || "walk") + "-search";
    label.htmlFor = search.id;
    container.appendChild(label);
    container.appendChild(search);
    var buttons = el("div", "walk-buttons");
    buttons.appendChild(el("button", "expand-all", "expand all"));
    buttons.appendChild(el("button", "collapse-all", "collapse all"));
    Array.prototype.forEach.call(buttons.children, function (b) { b.type = "button"; });
    container.appendChild(buttons);
    var list = el("ol", "tree");
    data.stages.forEach(function (stage, index) { list.appendChild(summary(stage, index)); });
    list.appendChild(el("li", "leaf", data.hits.length + " passages ranked"));
    container.appendChild(list);
    return mount(container, data);
  }

  // Make the stages under `root` open, filter and page their candidates (drawn on opening).
  function mount(root, data) {
    var RANK = {};
    data.hits.forEach(function (hit) { RANK[hit.id] = hit.rank; });
    var stages = Array.prototype.slice.call(root.querySelectorAll("details.stage"));
    var search = root.querySelector(".walk-search");

    function state(details) {
      if (!details._state) details._state = { q: "", status: "all", shown: PAGE, built: false };
      return details._state;
    }

    function build(details, st) {
      var body = details.querySelector(".body");
      var controls = el("div", "controls");
      var filter = el("input", "stage-filter");
      filter.type = "search";
      filter.placeholder = "Filter this stage…";
      filter.setAttribute("aria-label", "Filter the candidates of stage " +
        details.getAttribute("data-name"));
      filter.value = st.q;
      filter.addEventListener("input", function () {
        st.q = filter.value.toLowerCase();
        st.shown = PAGE;
        draw(details);
      });
      var select = el("select", "status-filter");
      select.setAttribute("aria-label", "Show candidates by status");
      ["all", "kept", "pruned", "reopened"].forEach(function (name) {
        var option = el("option", null, name);
        option.value = name;
        select.appendChild(option);
      });
      select.addEventListener("change", function () {
        st.status = select.value;
        st.shown = PAGE;
        draw(details);
      });
      controls.appendChild(filter);
      controls.appendChild(select);
      var table = el("table", "cands");
      var head = el("thead");
      var names = el("tr");
      [["barcell", ""], ["p", "P(yes)"], ["st", "status"], ["label", "candidate"], ["via", "reached under"]]
        .forEach(function (column) {
          var cell = el("th", column[0], column[1]);
          cell.scope = "col";
          if (!column[1]) cell.appendChild(el("span", "sr-only", "P(yes) as a bar"));
          names.appendChild(cell);
        });
      head.appendChild(names);
      table.appendChild(head);
      table.appendChild(el("tbody"));
      body.appendChild(controls);
      body.appendChild(table);
      var more = el("div", "more");
      more.setAttribute("aria-live", "polite");
      body.appendChild(more);
      st.filter = filter;
      st.built = true;
    }

    function row(r) {
      var tr = el("tr", "cand status-" + (r[3] === "opened" ? "kept" : r[3]));
      tr.setAttribute("data-key", r[0]);
      tr.setAttribute("data-status", r[3]);
      var barCell = el("td", "barcell");
      var bar = el("span", "bar");
      bar.setAttribute("aria-hidden", "true");
      var fill = el("i");
      fill.style.width = r[2] === null ? "0" : (100 * Math.max(0, Math.min(1, r[2]))).toFixed(1) + "%";
      bar.appendChild(fill);
      barCell.appendChild(bar);
      tr.appendChild(barCell);
      tr.appendChild(el("td", "p", r[2] === null ? "–" : r[2].toFixed(3)));
      var st = el("td", "st");
      st.appendChild(el("span", "badge " + r[3], r[3]));
      tr.appendChild(st);
      var label = el("td", "label", r[1]);
      label.appendChild(el("code", null, r[0]));
      if (RANK[r[0]]) {
        var link = el("a", "rank-link", "→ [" + RANK[r[0]] + "]");
        link.href = "#p-" + RANK[r[0]];
        link.setAttribute("aria-label", "ranked " + RANK[r[0]] + " in the final ranking");
        label.appendChild(link);
      }
      tr.appendChild(label);
      tr.appendChild(el("td", "via", r[4] ? "under " + r[4] : ""));
      return tr;
    }

    function draw(details) {
      var st = state(details);
      if (!st.built) build(details, st);
      var stage = data.stages[+details.getAttribute("data-stage")];
      var rows = stage.rows.filter(function (r) { return wanted(r, st.status) && matches(r, st.q); });
      var tbody = details.querySelector("tbody");
      tbody.textContent = "";
      var fragment = document.createDocumentFragment();
      rows.slice(0, st.shown).forEach(function (r) { fragment.appendChild(row(r)); });
      tbody.appendChild(fragment);
      var more = details.querySelector(".more");
      more.textContent = "showing " + Math.min(st.shown, rows.length) + " of " + rows.length;
      if (rows.length > st.shown) {
        var next = el("button", "show-more", "show " + Math.min(PAGE, rows.length - st.shown) + " more");
        next.type = "button";
        next.addEventListener("click", function () { st.shown += PAGE; draw(details); });
        var all = el("button", "show-all", "show all");
        all.type = "button";
        all.addEventListener("click", function () { st.shown = rows.length; draw(details); });
        more.appendChild(document.createTextNode(" "));
        more.appendChild(next);
        more.appendChild(document.createTextNode(" "));
        more.appendChild(all);
      }
    }

    stages.forEach(function (details) {
      details.addEventListener("toggle", function () { if (details.open) draw(details); });
    });

    var timer = null;
    function globalSearch() {
      var q = search.value.trim().toLowerCase();
      stages.forEach(function (details) {
        var st = state(details);
        var stage = data.stages[+details.getAttribute("data-stage")];
        var count = q ? stage.rows.filter(function (r) { return matches(r, q); }).length : 0;
        details.querySelector(".matches").textContent = q ? count + " match" + (count === 1 ? "" : "es") : "";
        st.q = q;
        st.shown = PAGE;
        if (st.filter) st.filter.value = q;
        if (q) details.open = count > 0;
        if (details.open) draw(details);
      });
    }
    if (search) {
      search.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(globalSearch, 120);
      });
    }

    function setAll(open) { stages.forEach(function (details) { details.open = open; }); }
    var expand = root.querySelector(".expand-all");
    var collapse = root.querySelector(".collapse-all");
    if (expand) expand.addEventListener("click", function () { setAll(true); });
    if (collapse) collapse.addEventListener("click", function () { setAll(false); });
    return { stages: stages, setAll: setAll };
  }

  window.DecisionRAGWalk = { render: render, mount: mount };

  // the walk page: its data block, its static stages and its answer's citations
  var block = document.getElementById("walk-data");
  if (!block) return;
  mount(document, JSON.parse(block.textContent));
  Array.prototype.slice.call(document.querySelectorAll("a.cite")).forEach(function (link) {
    var target = document.getElementById("p-" + link.getAttribute("data-cite"));
    if (target) target.classList.add("cited");
    link.addEventListener("click", function () {
      if (!target) return;
      target.classList.remove("flash");
      void target.offsetWidth;
      target.classList.add("flash");
    });
  });
})();
"""
