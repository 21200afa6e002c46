// The decisionrag console: a page over this server's own API (see decisionrag/_serve/_ui.py).
// Plain browser JavaScript, no build step, no library; text from the server is only ever set
// as text (textContent), never parsed as HTML.
(function () {
  "use strict";

  var KEY_STORE = "decisionrag.console.key";
  var CITATION = /\[(\d+(?:\s*[,;]\s*\d+)*)\]/g;
  var FILTER_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;
  var STATUS = {
    400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 413: "Too large",
    422: "Invalid request", 429: "Too many requests", 500: "Server error", 501: "Not available",
    502: "Bad gateway", 503: "Service unavailable", 504: "Deadline passed"
  };
  var state = {
    config: null, key: "", tree: null, trees: [], metadata: null, conversation: null,
    controller: null, pages: {}, selected: null, ids: 0, answer: "", sources: 0
  };

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function fmt(n) { return Number(n).toLocaleString("en-US"); }

  function plural(n, word) { return fmt(n) + " " + word + (n === 1 ? "" : "s"); }

  function newId(prefix) { state.ids += 1; return prefix + "-" + state.ids; }

  function show(node, visible) { node.hidden = !visible; }

  // -- talking to the server -------------------------------------------------------------

  function headers(json, accept) {
    var found = { Accept: accept || "application/json" };
    if (json) found["Content-Type"] = "application/json";
    if (state.key) found.Authorization = "Bearer " + state.key;
    return found;
  }

  async function problem(response) {
    var detail = null;
    try { detail = (await response.json()).error || null; } catch (ignored) { detail = null; }
    return failure(response.status, detail);
  }

  function failure(status, detail) {
    var text = status + " " + (STATUS[status] || "Error");
    if (detail && detail.message) text += ": " + detail.message;
    if (detail && detail.field) text += " (field " + detail.field + ")";
    if (status === 401) {
      text += state.key ? ". Check the API key above." : ". Enter an API key above.";
    } else if (status === 403) {
      text += ". This key may not read this tree.";
    }
    var error = new Error(text);
    error.status = status;
    error.detail = detail;
    return error;
  }

  async function api(path, body, signal) {
    var options = { headers: headers(body !== undefined), signal: signal };
    if (body !== undefined) {
      options.method = "POST";
      options.body = JSON.stringify(body);
    }
    var response;
    try {
      response = await fetch(path, options);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new Error("Could not reach the server (" + error.message + ").");
    }
    if (!response.ok) throw await problem(response);
    return response.json();
  }

  function treePath(suffix) {
    return "/v1/trees/" + encodeURIComponent(state.tree) + suffix;
  }

  // -- messages --------------------------------------------------------------------------

  function showError(error) {
    if (error && error.name === "AbortError") return;
    var box = $("alert");
    box.textContent = error && error.message ? error.message : String(error);
    box.className = "alert error";
    box.hidden = false;
    if (error && error.status === 401 && state.config && state.config.keys) $("key").focus();
  }

  function showNote(text) {
    var box = $("alert");
    box.textContent = text;
    box.className = "alert note";
    box.hidden = false;
  }

  function clearAlert() { $("alert").hidden = true; $("alert").textContent = ""; }

  // -- start -----------------------------------------------------------------------------

  async function boot() {
    try {
      var response = await fetch("/ui/config.json", { headers: { Accept: "application/json" } });
      if (!response.ok) throw await problem(response);
      state.config = await response.json();
    } catch (error) {
      showError(error);
      return;
    }
    var config = state.config;
    $("version").textContent = config.version;
    var preset = $("preset");
    preset.appendChild(option("", "server default (" + config.default_preset + ")"));
    config.presets.forEach(function (name) { preset.appendChild(option(name, name)); });
    $("k").max = config.max_k;
    if (config.answers) {
      show($("answer-button"), true);
      $("search-button").textContent = "Search only";
    } else {
      $("answer-button").remove();  // Enter must not press a hidden button
    }
    bindEvents();
    if (config.keys) {
      show($("key-form"), true);
      state.key = sessionStorage.getItem(KEY_STORE) || "";
      if (!state.key) {
        showNote("This server needs an API key: enter it above (it is kept for this tab only).");
        $("key").focus();
        return;
      }
      $("key").placeholder = "a key is set for this tab";
    }
    await loadTrees();
  }

  function option(value, label) {
    var node = el("option", null, label);
    node.value = value;
    return node;
  }

  async function loadTrees() {
    var select = $("tree");
    var trees;
    try {
      trees = (await api("/v1/trees")).trees;
    } catch (error) {
      select.textContent = "";
      select.appendChild(option("", "—"));
      select.disabled = true;
      showError(error);
      return;
    }
    clearAlert();
    state.trees = trees;
    select.textContent = "";
    trees.forEach(function (tree) {
      select.appendChild(option(tree.name, tree.name + " — " + plural(tree.documents, "document")));
    });
    select.disabled = trees.length === 0;
    if (!trees.length) {
      showNote("This key may read no tree on this server.");
      return;
    }
    var chosen = trees.filter(function (t) { return t.name === state.tree; })[0] ||
      trees.filter(function (t) { return t.default; })[0] || trees[0];
    select.value = chosen.name;
    await chooseTree(chosen.name);
  }

  async function chooseTree(name) {
    state.tree = name;
    state.pages = {};
    state.selected = null;
    var tree = state.trees.filter(function (t) { return t.name === name; })[0];
    $("tree-summary").textContent = tree ? plural(tree.documents, "document") + " · " +
      plural(tree.passages, "passage") + " · generation " + tree.generation : "";
    resetResults();
    await Promise.all([openRoot(), loadMetadata()]);
  }

  // -- the tree browser --------------------------------------------------------------------

  async function page(id, offset) {
    var cacheKey = id + "\u0000" + offset;
    if (!state.pages[cacheKey]) {
      state.pages[cacheKey] = api(treePath("/nodes/" + encodeURIComponent(id) + "?offset=" + offset +
        "&limit=" + state.config.children_page)).catch(function (error) {
        delete state.pages[cacheKey];
        throw error;
      });
    }
    return state.pages[cacheKey];
  }

  async function openRoot() {
    var view = $("tree-view");
    view.textContent = "";
    show($("node-details"), false);
    var data;
    try {
      data = await page("root", 0);
    } catch (error) {
      showError(error);
      return;
    }
    var root = data.node;
    var item = treeItem({ id: root.id, kind: root.kind, n_passages: root.n_passages,
      title: root.title || state.tree }, 1, 1, 1);
    item.tabIndex = 0;
    view.appendChild(item);
    addChildren(item, data);
    item.setAttribute("aria-expanded", "true");
    markSelected(item);
    showDetails(data);
    performance.mark("decisionrag:tree-painted");
    document.body.setAttribute("data-tree-painted", String(Math.round(performance.now())));
  }

  function treeItem(ref, level, position, size) {
    var item = el("li", "node kind-" + ref.kind);
    item.setAttribute("role", "treeitem");
    item.setAttribute("aria-level", level);
    item.setAttribute("aria-posinset", position);
    item.setAttribute("aria-setsize", size);
    item.setAttribute("aria-selected", "false");
    item.tabIndex = -1;
    item.dataset.id = ref.id;
    item.dataset.kind = ref.kind;
    if (ref.kind !== "passage") item.setAttribute("aria-expanded", "false");
    var row = el("div", "row");
    row.id = newId("node");
    row.appendChild(el("span", "twisty"));
    row.lastChild.setAttribute("aria-hidden", "true");
    row.appendChild(el("span", "badge kind", ref.kind));
    row.appendChild(el("span", "title", ref.title || ref.id));
    if (ref.kind !== "passage") row.appendChild(el("span", "count", plural(ref.n_passages, "passage")));
    item.setAttribute("aria-labelledby", row.id);
    item.appendChild(row);
    return item;
  }

  function addChildren(item, data) {
    var group = item.querySelector(":scope > ul");
    if (!group) {
      group = el("ul");
      group.setAttribute("role", "group");
      item.appendChild(group);
    }
    var more = group.querySelector(":scope > li.more-item");
    if (more) more.remove();
    var level = +item.getAttribute("aria-level") + 1;
    var fragment = document.createDocumentFragment();
    data.children.forEach(function (child, index) {
      fragment.appendChild(treeItem(child, level, data.offset + index + 1, data.children_total));
    });
    var shown = data.offset + data.children.length;
    if (shown < data.children_total) {
      var next = el("li", "more-item");
      next.setAttribute("role", "treeitem");
      next.setAttribute("aria-level", level);
      next.tabIndex = -1;
      next.dataset.offset = shown;
      var count = Math.min(state.config.children_page, data.children_total - shown);
      next.appendChild(el("span", "more-text", "show " + fmt(count) + " more (" + fmt(shown) + " of " +
        fmt(data.children_total) + " shown)"));
      fragment.appendChild(next);
    }
    if (!data.children.length && !data.offset) {
      var none = el("li", "muted empty", "no children");
      none.setAttribute("role", "none");
      fragment.appendChild(none);
    }
    group.appendChild(fragment);
  }

  async function expand(item) {
    if (item.getAttribute("aria-expanded") !== "false") return;
    var group = item.querySelector(":scope > ul");
    item.setAttribute("aria-expanded", "true");
    if (group) {
      group.hidden = false;
      return;
    }
    item.setAttribute("aria-busy", "true");
    try {
      addChildren(item, await page(item.dataset.id, 0));
    } catch (error) {
      item.setAttribute("aria-expanded", "false");
      showError(error);
    } finally {
      item.removeAttribute("aria-busy");
    }
  }

  function collapse(item) {
    if (item.getAttribute("aria-expanded") !== "true") return;
    item.setAttribute("aria-expanded", "false");
    var group = item.querySelector(":scope > ul");
    if (group) group.hidden = true;
  }

  async function loadMore(more) {
    var parent = more.parentNode.closest("[role=treeitem]");
    more.setAttribute("aria-busy", "true");
    try {
      var data = await page(parent.dataset.id, +more.dataset.offset);
      var position = +more.dataset.offset;
      addChildren(parent, data);
      var first = parent.querySelectorAll(":scope > ul > [role=treeitem]")[position];
      if (first) focusItem(first);
    } catch (error) {
      more.removeAttribute("aria-busy");
      showError(error);
    }
  }

  function markSelected(item) {
    if (state.selected) state.selected.setAttribute("aria-selected", "false");
    state.selected = item;
    item.setAttribute("aria-selected", "true");
  }

  async function select(item) {
    markSelected(item);
    try {
      showDetails(await page(item.dataset.id, 0));
    } catch (error) {
      showError(error);
    }
  }

  function showDetails(data) {
    var node = data.node;
    $("node-title").textContent = node.title || node.description ||
      (node.kind === "root" ? state.tree : node.id);
    $("node-kind").textContent = node.kind;
    $("node-id").textContent = node.id;
    $("node-path").textContent = data.path.map(function (p) {
      return p.kind === "root" ? state.tree : p.title;
    }).join(" › ");
    var counts = [plural(node.n_passages, "passage")];
    if (node.kind !== "passage") counts.push(plural(data.children_total, "child").replace("childs", "children"));
    $("node-counts").textContent = counts.join(" · ");
    var list = $("node-metadata");
    list.textContent = "";
    Object.keys(node.metadata).forEach(function (key) {
      list.appendChild(el("dt", null, key));
      list.appendChild(el("dd", null, display(node.metadata[key])));
    });
    $("node-text").textContent = node.text || (node.kind === "document" ? node.description : "");
    show($("node-details"), true);
  }

  function display(value) {
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  function visibleItems() {
    return Array.prototype.filter.call($("tree-view").querySelectorAll("[role=treeitem]"),
      function (item) { return item.offsetParent !== null; });
  }

  function focusItem(item) {
    Array.prototype.forEach.call($("tree-view").querySelectorAll("[role=treeitem][tabindex='0']"),
      function (other) { other.tabIndex = -1; });
    item.tabIndex = 0;
    item.focus();
  }

  function activate(item) {
    if (item.classList.contains("more-item")) return loadMore(item);
    return select(item);
  }

  function onTreeKey(event) {
    var item = event.target.closest("[role=treeitem]");
    if (!item) return;
    var items = visibleItems();
    var at = items.indexOf(item);
    var handled = true;
    switch (event.key) {
      case "ArrowDown": if (at < items.length - 1) focusItem(items[at + 1]); break;
      case "ArrowUp": if (at > 0) focusItem(items[at - 1]); break;
      case "Home": focusItem(items[0]); break;
      case "End": focusItem(items[items.length - 1]); break;
      case "ArrowRight":
        if (item.getAttribute("aria-expanded") === "false") {
          expand(item);
        } else if (item.getAttribute("aria-expanded") === "true") {
          var child = item.querySelector(":scope > ul > [role=treeitem]");
          if (child) focusItem(child);
        }
        break;
      case "ArrowLeft":
        if (item.getAttribute("aria-expanded") === "true") {
          collapse(item);
        } else {
          var parent = item.parentNode.closest("[role=treeitem]");
          if (parent) focusItem(parent);
        }
        break;
      case "Enter": case " ": activate(item); break;
      default: handled = false;
    }
    if (handled) event.preventDefault();
  }

  function onTreeClick(event) {
    var item = event.target.closest("[role=treeitem]");
    if (!item) return;
    focusItem(item);
    if (item.classList.contains("more-item")) {
      loadMore(item);
      return;
    }
    select(item);
    if (item.getAttribute("aria-expanded") === "false") expand(item);
    else if (event.target.closest(".twisty")) collapse(item);
  }

  // -- filters from the tree's metadata ---------------------------------------------------

  async function loadMetadata() {
    state.metadata = null;
    $("filter-rows").textContent = "";
    if (!state.config.filters) return;
    try {
      state.metadata = await api(treePath("/metadata"));
    } catch (error) {
      showError(error);
      return;
    }
    var meta = state.metadata;
    var usable = meta.keys.filter(function (k) { return FILTER_NAME.test(k.key); });
    show($("filters"), true);
    $("add-filter").disabled = !usable.length;
    $("filter-note").textContent = !meta.summarised
      ? "This tree file predates metadata summaries: rebuild or sync it to filter by its keys."
      : !meta.keys.length ? "This tree's documents carry no metadata."
        : plural(meta.keys.length, "key") + " over " + plural(meta.documents, "document") + ".";
  }

  var OPERATORS = [["eq", "is"], ["ne", "is not"], ["in", "is one of"], ["gte", "at least"],
    ["lte", "at most"], ["exists", "is present"], ["missing", "is missing"]];

  function addFilterRow() {
    var meta = state.metadata;
    if (!meta) return;
    var number = $("filter-rows").children.length + 1;
    var row = el("div", "filter-row");
    row.setAttribute("role", "group");
    row.setAttribute("aria-label", "filter " + number);
    var key = el("select", "filter-key");
    key.setAttribute("aria-label", "metadata key of filter " + number);
    meta.keys.forEach(function (entry) {
      var choice = option(entry.key, entry.key + " (" + plural(entry.documents, "doc") + ")");
      choice.disabled = !FILTER_NAME.test(entry.key);
      key.appendChild(choice);
    });
    var first = meta.keys.filter(function (k) { return FILTER_NAME.test(k.key); })[0];
    key.value = first.key;
    var operator = el("select", "filter-op");
    operator.setAttribute("aria-label", "comparison of filter " + number);
    OPERATORS.forEach(function (pair) { operator.appendChild(option(pair[0], pair[1])); });
    var value = el("input", "filter-value");
    value.type = "text";
    value.setAttribute("aria-label", "value of filter " + number);
    var list = el("datalist");
    list.id = newId("values");
    value.setAttribute("list", list.id);
    var remove = el("button", "remove-filter", "Remove");
    remove.type = "button";
    remove.setAttribute("aria-label", "remove filter " + number);
    remove.addEventListener("click", function () { row.remove(); $("add-filter").focus(); });
    function describe() {
      var entry = keyInfo(key.value);
      list.textContent = "";
      (entry.values || []).forEach(function (v) { list.appendChild(option(display(v), display(v))); });
      value.placeholder = entry.values ? entry.values.slice(0, 4).map(display).join(", ") +
        (entry.values.length > 4 ? ", …" : "") : entry.numbers ? entry.numbers[0] + " – " + entry.numbers[1]
        : "value";
      value.disabled = operator.value === "exists" || operator.value === "missing";
    }
    key.addEventListener("change", describe);
    operator.addEventListener("change", describe);
    describe();
    [key, operator, value, list, remove].forEach(function (part) { row.appendChild(part); });
    $("filter-rows").appendChild(row);
    key.focus();
  }

  function keyInfo(name) {
    return state.metadata.keys.filter(function (k) { return k.key === name; })[0];
  }

  function typed(entry, text) {
    var values = entry.values || [];
    var numeric = values.some(function (v) { return typeof v === "number"; }) || (entry.numbers && !entry.texts);
    if (numeric && text !== "" && !isNaN(Number(text))) return Number(text);
    if ((text === "true" || text === "false") && values.some(function (v) { return typeof v === "boolean"; })) {
      return text === "true";
    }
    return text;
  }

  function readFilters() {
    var parts = [];
    Array.prototype.forEach.call($("filter-rows").children, function (row) {
      var name = row.querySelector(".filter-key").value;
      var op = row.querySelector(".filter-op").value;
      var text = row.querySelector(".filter-value").value.trim();
      var entry = keyInfo(name);
      var condition;
      if (op === "exists" || op === "missing") {
        condition = { exists: op === "exists" };
      } else if (!text) {
        throw new Error("Filter on " + name + ": give a value.");
      } else if (op === "gte" || op === "lte") {
        if (isNaN(Number(text))) throw new Error("Filter on " + name + ": " + text + " is not a number.");
        condition = {};
        condition[op] = Number(text);
      } else if (op === "in") {
        condition = { in: text.split(",").map(function (t) { return typed(entry, t.trim()); })
          .filter(function (v) { return v !== ""; }) };
      } else if (op === "ne") {
        condition = { ne: typed(entry, text) };
      } else {
        condition = typed(entry, text);
      }
      parts.push([name, condition]);
    });
    if (!parts.length) return null;
    var names = parts.map(function (p) { return p[0]; });
    var distinct = names.filter(function (n, i) { return names.indexOf(n) === i; });
    function one(pair) { var found = {}; found[pair[0]] = pair[1]; return found; }
    if (distinct.length === parts.length && parts.length <= 10) {
      return parts.reduce(function (all, pair) { all[pair[0]] = pair[1]; return all; }, {});
    }
    return { and: parts.map(one) };
  }

  // -- asking ------------------------------------------------------------------------------

  function resetResults() {
    $("hits").textContent = "";
    $("results-status").textContent = "Ask a question to rank this tree's passages.";
    show($("walk"), false);
    show($("answer"), false);
    $("walk-view").textContent = "";
  }

  function conversationId() {
    var bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes);
    return "console-" + Array.prototype.map.call(bytes, function (b) {
      return (b + 256).toString(16).slice(1);
    }).join("");
  }

  function setConversation(on) {
    state.conversation = on ? conversationId() : null;
    $("turns").textContent = "";
    $("conversation-id").textContent = state.conversation || "";
    show($("conversation"), false);
    show($("new-conversation"), on);
  }

  function addTurn(role, text) {
    if (!state.conversation) return;
    var turn = el("li", "turn " + role);
    turn.appendChild(el("b", null, role === "user" ? "you" : "answer"));
    turn.appendChild(document.createTextNode(" " + text));
    $("turns").appendChild(turn);
    show($("conversation"), true);
  }

  function setBusy(busy) {
    ["search-button", "answer-button"].forEach(function (id) { if ($(id)) $(id).disabled = busy; });
    $("results").setAttribute("aria-busy", busy ? "true" : "false");
  }

  async function ask(action) {
    var query = $("query").value.trim();
    if (!query) {
      $("query").focus();
      return;
    }
    clearAlert();
    var k = Math.max(1, Math.min(state.config.max_k, parseInt($("k").value, 10) || 10));
    var body = { tree: state.tree, query: query, k: k, walk: true };
    if ($("preset").value) body.preset = $("preset").value;
    var context = $("context").value.trim();
    if (context) body.context = context;
    try {
      var filters = readFilters();
      if (filters) body.filters = filters;
    } catch (error) {
      showError(error);
      return;
    }
    if (state.conversation) body.conversation_id = state.conversation;
    if (state.controller) state.controller.abort();
    var controller = new AbortController();
    state.controller = controller;
    setBusy(true);
    $("results-status").textContent = action === "answer" ? "Walking the tree, then answering…"
      : "Walking the tree…";
    try {
      if (action === "answer") {
        body.top = Math.min(5, k);
        body.stream = true;
        await streamAnswer(body, query, controller.signal);
      } else {
        show($("answer"), false);
        var data = await api("/v1/retrieve", body, controller.signal);
        addTurn("user", query);
        showRetrieval(data);
      }
    } catch (error) {
      if (error.name !== "AbortError") {
        $("results-status").textContent = "No result: see the message above.";
        showError(error);
      } else if (state.controller === controller) {
        $("results-status").textContent = "Stopped.";
      }
    } finally {
      if (state.controller === controller) {
        state.controller = null;
        setBusy(false);
      }
    }
  }

  function showRetrieval(data) {
    var hits = $("hits");
    hits.textContent = "";
    var fragment = document.createDocumentFragment();
    data.results.forEach(function (hit, index) { fragment.appendChild(hitItem(hit, index + 1)); });
    hits.appendChild(fragment);
    var usage = data.usage;
    $("results-status").textContent = (data.results.length ? plural(data.results.length, "passage") +
      " ranked" : "No passage found") + " in " + data.seconds.toFixed(2) + " s · " +
      plural(usage.requests, "judge request") + " · " + fmt(usage.input_tokens) + " input tokens · preset " +
      data.preset;
    if (data.walk) {
      var walk = data.walk;
      $("walk-summary").textContent = plural(walk.length, "stage") + " · " +
        plural(walk.reduce(function (n, s) { return n + s.requests; }, 0), "request") + " · " +
        fmt(walk.reduce(function (n, s) { return n + s.input_tokens; }, 0)) + " input tokens";
      window.DecisionRAGWalk.render($("walk-view"), {
        stages: walk,
        hits: data.results.map(function (hit, index) { return { id: hit.id, rank: index + 1 }; })
      });
      show($("walk"), true);
    }
  }

  function bar(name, value) {
    var metric = el("span", "metric");
    metric.appendChild(document.createTextNode(name + " "));
    var track = el("span", "bar");
    track.setAttribute("aria-hidden", "true");
    var fill = el("i");
    fill.style.width = (100 * Math.max(0, Math.min(1, value))).toFixed(1) + "%";
    track.appendChild(fill);
    metric.appendChild(track);
    metric.appendChild(document.createTextNode(" " + value.toFixed(3)));
    return metric;
  }

  function hitItem(hit, rank) {
    var item = el("li", "hit");
    item.id = "p-" + rank;
    item.tabIndex = -1;
    item.dataset.id = hit.id;
    var head = el("div", "hit-head");
    head.appendChild(el("span", "rank", "[" + rank + "]"));
    head.appendChild(document.createTextNode(" "));
    head.appendChild(el("span", "path", hit.path.join(" › ")));
    head.appendChild(document.createTextNode(" "));
    head.appendChild(el("code", null, hit.id));
    var open = el("button", "show-node", "details");
    open.type = "button";
    open.setAttribute("aria-label", "show passage " + rank + " in the tree panel");
    open.addEventListener("click", function () { showNode(hit.id); });
    head.appendChild(open);
    item.appendChild(head);
    var metrics = el("div", "metrics");
    metrics.appendChild(bar("score", hit.score));
    metrics.appendChild(bar("P(yes)", hit.binary));
    if (hit.choice !== null && hit.choice !== undefined) metrics.appendChild(bar("choice", hit.choice));
    item.appendChild(metrics);
    var meta = el("div", "metadata");
    Object.keys(hit.metadata).forEach(function (key) {
      var chip = el("span", "meta");
      chip.appendChild(el("b", null, key));
      chip.appendChild(document.createTextNode(" " + display(hit.metadata[key])));
      meta.appendChild(chip);
    });
    item.appendChild(meta);
    item.appendChild(el("p", "text", hit.text));
    return item;
  }

  async function showNode(id) {
    try {
      showDetails(await page(id, 0));
      $("node-details").scrollIntoView({ block: "nearest" });
    } catch (error) {
      showError(error);
    }
  }

  // -- the answer, streamed --------------------------------------------------------------

  async function streamAnswer(body, query, signal) {
    var response;
    try {
      response = await fetch("/v1/answer", { method: "POST", headers: headers(true, "text/event-stream"),
        body: JSON.stringify(body), signal: signal });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new Error("Could not reach the server (" + error.message + ").");
    }
    if (!response.ok) throw await problem(response);
    addTurn("user", query);
    state.answer = "";
    state.sources = 0;
    var text = $("answer-text");
    text.textContent = "";
    text.setAttribute("aria-busy", "true");
    $("answer-note").textContent = "the answer model is writing…";
    $("answer").classList.remove("failed");
    show($("answer"), true);
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    var finished = false;
    try {
      while (!finished) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, "\n");
        var end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          var block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          finished = onEvent(parseEvent(block), body.top) || finished;
        }
      }
    } finally {
      text.setAttribute("aria-busy", "false");
    }
    if (!finished) throw new Error("The answer stream ended before the answer was complete.");
  }

  function parseEvent(block) {
    var name = "message";
    var data = [];
    block.split("\n").forEach(function (line) {
      if (line.indexOf("event:") === 0) name = line.slice(6).trim();
      else if (line.indexOf("data:") === 0) data.push(line.slice(5).replace(/^ /, ""));
    });
    return { name: name, data: data.length ? JSON.parse(data.join("\n")) : null };
  }

  function onEvent(event, top) {
    if (event.name === "retrieved") {
      showRetrieval(event.data);
      state.sources = Math.min(top, event.data.results.length);
    } else if (event.name === "delta") {
      state.answer += event.data.text;
      renderAnswer(state.answer, state.sources);
    } else if (event.name === "done") {
      var done = event.data;
      state.sources = done.sources.length;
      renderAnswer(done.answer, state.sources);
      var generation = done.generation;
      var note = "by " + generation.model + " from passages 1–" + state.sources + " above · " +
        generation.seconds.toFixed(2) + " s";
      if (done.invalid_citations.length) {
        note += " · cited passages that were not given: " +
          done.invalid_citations.map(function (n) { return "[" + n + "]"; }).join(", ");
      }
      $("answer-note").textContent = note;
      addTurn("agent", done.answer.replace(CITATION, "").replace(/\s+([.,;:])/g, "$1").trim());
      return true;
    } else if (event.name === "error") {
      var detail = event.data && event.data.error;
      $("answer").classList.add("failed");
      $("answer-note").textContent = "the answer model failed; the text above is what it wrote before.";
      throw failure(502, detail);
    }
    return false;
  }

  function renderAnswer(text, given) {
    var target = $("answer-text");
    target.textContent = "";
    var last = 0;
    var match;
    CITATION.lastIndex = 0;
    while ((match = CITATION.exec(text)) !== null) {
      target.appendChild(document.createTextNode(text.slice(last, match.index) + "["));
      match[1].split(/\s*[,;]\s*/).forEach(function (part, index) {
        var n = parseInt(part, 10);
        if (index) target.appendChild(document.createTextNode(", "));
        if (n >= 1 && n <= given) {
          var link = el("a", "cite", n);
          link.href = "#p-" + n;
          link.dataset.cite = n;
          link.setAttribute("aria-label", "passage " + n);
          target.appendChild(link);
        } else {
          var bad = el("span", "cite invalid", n);
          bad.title = "no passage " + n + " was given to the answer model";
          target.appendChild(bad);
        }
      });
      target.appendChild(document.createTextNode("]"));
      last = CITATION.lastIndex;
    }
    target.appendChild(document.createTextNode(text.slice(last)));
  }

  function showPassage(rank) {
    var target = $("p-" + rank);
    if (!target) return;
    var still = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    target.scrollIntoView({ block: "center", behavior: still ? "auto" : "smooth" });
    document.querySelectorAll("li.hit.flash").forEach(function (other) { other.classList.remove("flash"); });
    void target.offsetWidth;
    target.classList.add("flash");
    target.focus({ preventScroll: true });
    history.replaceState(null, "", "#p-" + rank);
  }

  // -- wiring ------------------------------------------------------------------------------

  function bindEvents() {
    $("search-form").addEventListener("submit", function (event) {
      event.preventDefault();
      var button = event.submitter;
      ask(button && button.dataset.action === "search" ? "search" : state.config.answers ? "answer" : "search");
    });
    $("tree").addEventListener("change", function () { chooseTree($("tree").value); });
    $("tree-view").addEventListener("keydown", onTreeKey);
    $("tree-view").addEventListener("click", onTreeClick);
    $("add-filter").addEventListener("click", addFilterRow);
    $("conversation-mode").addEventListener("change", function () {
      setConversation($("conversation-mode").checked);
    });
    $("new-conversation").addEventListener("click", function () { setConversation(true); $("query").focus(); });
    $("answer-text").addEventListener("click", function (event) {
      var link = event.target.closest("a.cite");
      if (!link) return;
      event.preventDefault();
      showPassage(link.dataset.cite);
    });
    $("walk-view").addEventListener("click", function (event) {
      var link = event.target.closest("a.rank-link");
      if (!link) return;
      event.preventDefault();
      showPassage(link.getAttribute("href").slice(3));
    });
    $("key-form").addEventListener("submit", function (event) {
      event.preventDefault();
      var key = $("key").value.trim();
      if (!key) {
        $("key").focus();
        return;
      }
      state.key = key;
      sessionStorage.setItem(KEY_STORE, key);
      $("key").value = "";
      $("key").placeholder = "a key is set for this tab";
      loadTrees();
    });
    $("forget-key").addEventListener("click", function () {
      state.key = "";
      sessionStorage.removeItem(KEY_STORE);
      $("key").placeholder = "drag_…";
      showNote("The key is forgotten. Enter one to go on.");
      $("key").focus();
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && state.controller) state.controller.abort();
    });
  }

  window.addEventListener("DOMContentLoaded", boot);
})();
