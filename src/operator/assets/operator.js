// The operator page's client: plain DOM, GraphQL over fetch, live refresh over graphql-ws (the global
// `graphqlWs` comes from /operator/graphql-ws.js, graphql-ws's own browser build). No build step.

const KEY_STORAGE = "reftrail.operator.apiKey";
const ENDPOINT_FIELDS = `id url description enabled disabledReason failingSince eventTypes tagIds tagFilterState
  destination { ... on RabbitMqDestination { url exchange } ... on NatsDestination { url subject } }
  ordering heldBack { references deliveries oldest { referenceId eventId eventType occurredAt } }
  replay { state remaining }`;
const DELIVERY_FIELDS = `id eventId eventType status attemptCount nextAttemptAt heldBack heldBackReason createdAt updatedAt
  attempts { id attemptedAt statusCode error latencyMs responseBody }`;
const OVERVIEW = `query Operator($status: WebhookDeliveryStatus) {
  tags(first: 100) { edges { node { id name } } }
  webhookEndpoints(first: 20) { edges { node { ${ENDPOINT_FIELDS}
    deliveries(first: 20, filter: { status: $status }) { edges { node { ${DELIVERY_FIELDS} } } } } } }
}`;

import { loadAccess, setUpAccess } from "./operator-access.js";
import { ordering, target, windowAction } from "./operator-window.js";

const $ = (id) => document.getElementById(id);
const state = { key: localStorage.getItem(KEY_STORAGE), endpoints: [], tags: new Map(), ws: null, stop: null };

/** Creates an element with text content (never HTML: everything shown comes from the API). */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "class") node.className = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else if (name.startsWith("data-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

async function graphql(query, variables = {}) {
  const response = await fetch("/graphql", {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": state.key },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  if (body.errors?.length) {
    const error = new Error(body.errors.map((e) => e.message).join("; "));
    error.code = body.errors[0].extensions?.code;
    error.requiredScope = body.errors[0].extensions?.requiredScope;
    throw error;
  }
  return body.data;
}

function notify(message, kind = "error") {
  const notice = $("notice");
  notice.textContent = message;
  notice.dataset.kind = kind;
  notice.hidden = !message;
}

const time = (iso) => (iso ? new Date(iso).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "—");
const lower = (value) => String(value).toLowerCase();

function outcomeBadge(status) {
  const kind = { SUCCEEDED: "ok", FAILED: "bad", PENDING: "wait" }[status] ?? "off";
  return el("span", { class: `badge ${kind}`, "data-testid": "delivery-status" }, lower(status));
}

function endpointState(endpoint) {
  if (!endpoint.enabled) return el("span", { class: "badge off" }, "disabled");
  if (endpoint.failingSince) return el("span", { class: "badge bad" }, "failing");
  return el("span", { class: "badge ok" }, "healthy");
}

function filters(endpoint) {
  const cell = el("td");
  cell.append(
    endpoint.eventTypes
      ? el("div", {}, ...endpoint.eventTypes.map((type) => el("span", { class: "chip" }, lower(type))))
      : el("div", { class: "sub" }, "every event type"),
  );
  if (endpoint.tagFilterState === "EMPTY")
    cell.append(el("span", { class: "chip warn" }, "tag filter emptied by deletions: receives nothing"));
  else if (endpoint.tagIds)
    cell.append(
      el("div", {}, ...endpoint.tagIds.map((id) => el("span", { class: "chip" }, `#${state.tags.get(id) ?? id}`))),
    );
  else cell.append(el("div", { class: "sub" }, "every reference"));
  return cell;
}

/** Runs a mutation from a button, disabling it meanwhile; the live feed or a reload shows the outcome. */
function action(label, run, className = "ghost") {
  const button = el("button", { type: "button", class: className }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await run();
      notify("");
    } catch (error) {
      notify(`${label} failed: ${error.message}`);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

/** What operator-window.js needs of this page. */
const page = { $, el, graphql, notify, time, lower, action, load: () => load() };

function renderEndpoints() {
  const body = $("endpoints").querySelector("tbody");
  body.replaceChildren();
  for (const endpoint of state.endpoints) {
    body.append(
      el(
        "tr",
        { "data-endpoint": endpoint.id },
        el(
          "td",
          {},
          el("div", { class: "url" }, target(endpoint)),
          el("div", { class: "sub" }, endpoint.description ?? endpoint.id),
        ),
        el(
          "td",
          { "data-testid": "endpoint-state" },
          endpointState(endpoint),
          endpoint.disabledReason ? el("div", { class: "sub" }, endpoint.disabledReason) : null,
        ),
        el("td", { "data-testid": "failing-since" }, time(endpoint.failingSince)),
        filters(endpoint),
        ordering(endpoint, page),
        el(
          "td",
          { class: "actions" },
          windowAction("recover", endpoint, page),
          windowAction("replay", endpoint, page),
          action("Send test", () =>
            graphql(
              `
                mutation ($id: ID!) {
                  sendTestWebhook(input: { endpointId: $id }) {
                    delivery {
                      id
                    }
                  }
                }
              `,
              {
                id: endpoint.id,
              },
            ),
          ),
          action(
            endpoint.enabled ? "Disable" : "Enable",
            async () => {
              await graphql(
                `
                  mutation ($id: ID!, $enabled: Boolean!) {
                    updateWebhookEndpoint(input: { id: $id, enabled: $enabled }) {
                      webhookEndpoint {
                        id
                      }
                    }
                  }
                `,
                { id: endpoint.id, enabled: !endpoint.enabled },
              );
              await load();
            },
            endpoint.enabled ? "danger" : "ghost",
          ),
          action("Rotate secret", async () => {
            if (!confirm(`Rotate the signing secret of ${target(endpoint)}?`)) return;
            const data = await graphql(
              `
                mutation ($id: ID!) {
                  rotateWebhookEndpointSecret(input: { id: $id }) {
                    secret
                  }
                }
              `,
              { id: endpoint.id },
            );
            $("secret-endpoint").textContent = target(endpoint);
            $("secret-value").textContent = data.rotateWebhookEndpointSecret.secret;
            $("secret").hidden = false;
            await load();
          }),
        ),
      ),
    );
  }
  $("endpoint-count").textContent = `(${state.endpoints.length})`;
  const select = $("filter-endpoint");
  const chosen = select.value;
  select.replaceChildren(
    el("option", { value: "" }, "all endpoints"),
    ...state.endpoints.map((endpoint) => el("option", { value: endpoint.id }, target(endpoint))),
  );
  select.value = state.endpoints.some((endpoint) => endpoint.id === chosen) ? chosen : "";
}

function attemptsTable(attempts) {
  if (attempts.length === 0) return el("div", { class: "sub" }, "no attempt yet");
  return el(
    "table",
    { class: "attempts" },
    el("tr", {}, ...["#", "At", "Result", "Latency", "Response (first 2 KB)"].map((h) => el("th", {}, h))),
    ...attempts.map((attempt, index) =>
      el(
        "tr",
        { "data-testid": "attempt" },
        el("td", {}, String(index + 1)),
        el("td", { class: "mono" }, time(attempt.attemptedAt)),
        el(
          "td",
          { "data-testid": "attempt-result" },
          attempt.statusCode !== null
            ? el(
                "span",
                { class: `badge ${attempt.statusCode >= 200 && attempt.statusCode < 300 ? "ok" : "bad"}` },
                String(attempt.statusCode),
              )
            : el("span", { class: "badge bad" }, "no response"),
          attempt.error ? el("div", { class: "sub" }, attempt.error) : null,
        ),
        el("td", { class: "mono" }, `${attempt.latencyMs} ms`),
        el("td", { class: "excerpt" }, (attempt.responseBody ?? "").slice(0, 300)),
      ),
    ),
  );
}

function renderDeliveries() {
  const endpointFilter = $("filter-endpoint").value;
  const rows = state.endpoints
    .filter((endpoint) => !endpointFilter || endpoint.id === endpointFilter)
    .flatMap((endpoint) => endpoint.deliveries.edges.map(({ node }) => ({ endpoint, delivery: node })))
    .sort((a, b) => (a.delivery.id < b.delivery.id ? 1 : -1));
  const body = $("deliveries").querySelector("tbody");
  body.replaceChildren();
  for (const { endpoint, delivery } of rows) {
    body.append(
      el(
        "tr",
        { "data-delivery": delivery.id },
        el("td", { class: "mono" }, time(delivery.createdAt)),
        el(
          "td",
          {},
          el("div", {}, lower(delivery.eventType)),
          el("div", { class: "sub mono", title: "webhook-id" }, delivery.id),
        ),
        el("td", { class: "url" }, target(endpoint)),
        el(
          "td",
          {},
          outcomeBadge(delivery.status),
          // A held-back delivery's due time says nothing: it goes out after the earlier one, or at its throttle slot.
          delivery.heldBack
            ? el(
                "div",
                { class: "sub", "data-testid": "delivery-wait" },
                delivery.heldBackReason === "THROTTLED"
                  ? "throttled: the endpoint received its deliveries for this second"
                  : "held back behind an earlier delivery of its reference",
              )
            : delivery.nextAttemptAt
              ? el("div", { class: "sub", "data-testid": "delivery-wait" }, `next ${time(delivery.nextAttemptAt)}`)
              : null,
        ),
        el("td", {}, attemptsTable(delivery.attempts)),
        el(
          "td",
          { class: "actions" },
          action("Resend", () =>
            graphql(
              `
                mutation ($id: ID!) {
                  resendWebhookDelivery(input: { deliveryId: $id }) {
                    delivery {
                      id
                    }
                  }
                }
              `,
              {
                id: delivery.id,
              },
            ),
          ),
        ),
      ),
    );
  }
  $("delivery-count").textContent = `(${rows.length})`;
  $("no-deliveries").hidden = rows.length > 0;
}

/**
 * Numbers the loads: only the latest one started may show its answer. Answers can arrive out of order (a reload
 * for a live change started just before a filter change may be answered after it), and the older one would
 * otherwise replace the view the filter asked for.
 */
let latestLoad = 0;

async function load() {
  const thisLoad = ++latestLoad;
  try {
    const data = await graphql(OVERVIEW, { status: $("filter-status").value || null });
    if (thisLoad !== latestLoad) return;
    state.tags = new Map(data.tags.edges.map(({ node }) => [node.id, node.name]));
    state.endpoints = data.webhookEndpoints.edges.map(({ node }) => node);
    renderEndpoints();
    renderDeliveries();
    $("app").hidden = false;
    document.body.dataset.loaded = "true";
  } catch (error) {
    if (thisLoad !== latestLoad) return;
    if (error.code === "UNAUTHENTICATED") return askForKey("That API key was refused; enter another.");
    notify(`Could not load: ${error.message}`);
  }
}

/** Coalesces bursts of changes (a batch of attempts) into one reload. */
let reloadTimer;
function reloadSoon() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(load, 100);
}

function setLive(stateName, text) {
  $("live").dataset.state = stateName;
  $("live").textContent = text;
}

/** One subscription for every delivery change of the organization; each change reloads the view. */
function subscribe() {
  state.stop?.();
  state.ws?.dispose();
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/graphql`;
  state.ws = graphqlWs.createClient({
    url,
    connectionParams: { "x-api-key": state.key },
    retryAttempts: Infinity,
    shouldRetry: () => true,
    on: {
      connecting: () => setLive("connecting", "connecting"),
      connected: () => {
        setLive("on", "live");
        // Whatever changed while disconnected.
        reloadSoon();
      },
      closed: () => setLive("off", "offline"),
    },
  });
  state.stop = state.ws.subscribe(
    { query: "subscription { webhookDeliveryAttempts { id status attemptCount } }" },
    {
      next: () => reloadSoon(),
      error: (error) => notify(`Live updates stopped: ${error?.message ?? error?.reason ?? "connection error"}`),
      complete: () => undefined,
    },
  );
}

function askForKey(message = "") {
  $("app").hidden = true;
  $("key-form").hidden = false;
  notify(message);
  $("api-key").focus();
}

/** The keys and the audit log change with administrative changes only: loaded at start and on Refresh. */
async function loadKeysAndAudit() {
  try {
    await loadAccess(page);
  } catch (error) {
    notify(`Could not load the keys or the audit log: ${error.message}`);
  }
}

function start() {
  $("key-form").hidden = true;
  setUpAccess(page);
  subscribe();
  void load();
  void loadKeysAndAudit();
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.key = $("api-key").value.trim();
  localStorage.setItem(KEY_STORAGE, state.key);
  $("api-key").value = "";
  start();
});
$("change-key").addEventListener("click", () => askForKey());
$("refresh").addEventListener("click", () => {
  void load();
  void loadKeysAndAudit();
});
$("filter-endpoint").addEventListener("change", renderDeliveries);
$("filter-status").addEventListener("change", () => void load());
$("secret-dismiss").addEventListener("click", () => {
  $("secret-value").textContent = "";
  $("secret").hidden = true;
});

if (state.key) start();
else askForKey();
