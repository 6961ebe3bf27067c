// The operator page's keys panel and audit view (issue 48): the organization's API keys (create, list, revoke)
// and its administrative changes, newest first. Helpers of the page (element builder, GraphQL client, notices)
// come in as arguments: this module imports nothing. Each part asks the API on its own, so a key without
// `keys:read` or `audit:read` still sees the rest of the page, and the part says which scope it lacks.

const SCOPES = [
  "REFERENCES_READ",
  "REFERENCES_WRITE",
  "WEBHOOKS_READ",
  "WEBHOOKS_WRITE",
  "DOCUMENTS_READ",
  "DOCUMENTS_WRITE",
  "KEYS_READ",
  "KEYS_WRITE",
  "AUDIT_READ",
];
const KEY_FIELDS = "id name prefix scopes expiresAt trustedDocumentsOnly createdAt lastUsedAt revokedAt";
const KEYS = `query Keys { apiKeys { ${KEY_FIELDS} } }`;
const AUDIT = `query Audit { auditEvents(first: 50) { edges { node {
  id occurredAt action actorKeyPrefix actorCli targetType targetId changes requestId } } } }`;
const CREATE = `mutation CreateKey($input: CreateApiKeyInput!) { createApiKey(input: $input) { key apiKey { id } } }`;
const REVOKE = `mutation RevokeKey($id: ID!) { revokeApiKey(id: $id) { apiKey { id revokedAt } } }`;

/** `scopes:like:this` as the API's contract names them, from the GraphQL enum value. */
const scopeName = (value) => value.toLowerCase().replace("_", ":");

/** Fills the scope checkboxes of the create form once (every scope ticked: the form's default is a full key). */
export function setUpAccess(page) {
  const { $, el } = page;
  const box = $("key-scopes");
  if (box.childElementCount > 1) return;
  for (const scope of SCOPES)
    box.append(
      el("label", { class: "scope" }, el("input", { type: "checkbox", value: scope, checked: true }), scopeName(scope)),
    );
  $("key-create").addEventListener("submit", (event) => {
    event.preventDefault();
    void createKey(page);
  });
  $("new-key-dismiss").addEventListener("click", () => {
    $("new-key").hidden = true;
    $("new-key-value").textContent = "";
  });
}

/** Loads and shows the keys and the audit log. */
export async function loadAccess(page) {
  await Promise.all([loadPart(page, KEYS, "keys", renderKeys), loadPart(page, AUDIT, "audit", renderAudit)]);
}

async function loadPart(page, query, part, render) {
  const { $ } = page;
  const forbidden = $(`${part}-forbidden`);
  try {
    const data = await page.graphql(query);
    forbidden.hidden = true;
    $(part).hidden = false;
    render(data, page);
  } catch (error) {
    if (error.code !== "FORBIDDEN") throw error;
    // The field's error names the scope the key lacks (`requiredScope`); the rest of the page stands.
    forbidden.textContent = `This API key may not see this (it lacks ${error.requiredScope ?? "a scope"}).`;
    forbidden.hidden = false;
    $(part).hidden = true;
  }
}

function renderKeys({ apiKeys }, page) {
  const { $, el, time, action } = page;
  $("keys-count").textContent = String(apiKeys.length);
  const body = $("keys").querySelector("tbody");
  body.replaceChildren();
  for (const key of [...apiKeys].reverse()) {
    const expired = key.expiresAt && new Date(key.expiresAt) <= new Date();
    const stateBadge = key.revokedAt
      ? el("span", { class: "badge off" }, "revoked")
      : expired
        ? el("span", { class: "badge bad" }, "expired")
        : el("span", { class: "badge ok" }, "active");
    body.append(
      el(
        "tr",
        { "data-key": key.id },
        el("td", {}, el("div", {}, key.name || "—"), el("div", { class: "sub mono" }, key.id)),
        el("td", { class: "mono", "data-testid": "key-prefix" }, `${key.prefix}…`),
        el(
          "td",
          { "data-testid": "key-scopes" },
          ...key.scopes.map((scope) => el("span", { class: "chip" }, scopeName(scope))),
          key.trustedDocumentsOnly ? el("span", { class: "chip warn" }, "registered documents only") : null,
        ),
        el("td", { class: "mono" }, time(key.createdAt)),
        el("td", { class: "mono" }, time(key.lastUsedAt)),
        el("td", { class: "mono" }, key.expiresAt ? time(key.expiresAt) : "never"),
        el("td", { "data-testid": "key-state" }, stateBadge),
        el(
          "td",
          { class: "actions" },
          key.revokedAt
            ? null
            : action("Revoke", async () => {
                if (!window.confirm(`Revoke the key ${key.name || key.prefix}? It stops working at once.`)) return;
                await page.graphql(REVOKE, { id: key.id });
                await loadAccess(page);
              }),
        ),
      ),
    );
  }
}

async function createKey(page) {
  const { $, notify } = page;
  const scopes = [...$("key-scopes").querySelectorAll("input:checked")].map((box) => box.value);
  const expires = $("key-expires").value;
  const input = {
    name: $("key-name").value.trim(),
    scopes,
    trustedDocumentsOnly: $("key-trusted").checked,
    ...(expires && { expiresAt: new Date(`${expires}Z`).toISOString() }),
  };
  try {
    const { createApiKey } = await page.graphql(CREATE, { input });
    // Shown this once: the API never shows a key again.
    $("new-key-name").textContent = input.name;
    $("new-key-value").textContent = createApiKey.key;
    $("new-key").hidden = false;
    $("key-create").reset();
    for (const box of $("key-scopes").querySelectorAll("input")) box.checked = true;
    notify("");
    await loadAccess(page);
  } catch (error) {
    notify(`Create key failed: ${error.message}`);
  }
}

function renderAudit({ auditEvents }, page) {
  const { $, el, time } = page;
  const events = auditEvents.edges.map(({ node }) => node);
  $("audit-count").textContent = String(events.length);
  const body = $("audit").querySelector("tbody");
  body.replaceChildren();
  for (const event of events) {
    body.append(
      el(
        "tr",
        { "data-audit": event.id },
        el("td", { class: "mono" }, time(event.occurredAt)),
        el("td", { "data-testid": "audit-action" }, event.action),
        el("td", { class: "mono", "data-testid": "audit-actor" }, event.actorCli ? "CLI" : `${event.actorKeyPrefix}…`),
        el("td", {}, el("div", {}, event.targetType), el("div", { class: "sub mono" }, event.targetId)),
        el("td", { class: "excerpt mono" }, changesText(event.changes)),
      ),
    );
  }
}

/** `field: from → to` per changed field (URLs come masked, secrets and keys never). */
function changesText(changes) {
  return Object.entries(changes ?? {})
    .map(([field, change]) => `${field}: ${show(change?.from)} → ${show(change?.to)}`)
    .join("\n");
}

const show = (value) => (value === null || value === undefined ? "—" : JSON.stringify(value));
