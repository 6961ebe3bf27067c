// Recover and replay from the operator page (the window dialog), and the ordering column. Helpers of the page
// (element builder, GraphQL client, notices) come in as arguments: this module imports nothing.

/** The endpoint's ordering and, for REFERENCE, what it holds back now; below, its replay if one is scheduled. */
export function ordering(endpoint, helpers) {
  const cell = orderingCell(endpoint, helpers);
  const replay = endpoint.replay;
  if (replay)
    cell.append(
      helpers.el(
        "div",
        { class: "sub", "data-testid": "replay-state" },
        replay.state === "PAUSED"
          ? `replay paused while disabled (at most ${replay.remaining} events left; enabling resumes it)`
          : `replay running (at most ${replay.remaining} events left)`,
      ),
    );
  return cell;
}

function orderingCell(endpoint, { el, time, lower }) {
  const cell = el("td", { "data-testid": "ordering" });
  if (endpoint.ordering !== "REFERENCE") {
    cell.append(el("div", { class: "sub" }, "none (parallel)"));
    return cell;
  }
  const { references, deliveries, oldest } = endpoint.heldBack;
  cell.append(el("span", { class: "chip" }, "per reference"));
  cell.append(
    el(
      "div",
      { class: "sub", "data-testid": "held-back" },
      references === 0
        ? "nothing held back"
        : `${references} reference${references === 1 ? "" : "s"} held back (${deliveries} deliveries)`,
    ),
  );
  if (oldest)
    cell.append(
      el(
        "div",
        { class: "sub", "data-testid": "oldest-held-back" },
        `oldest waiting: ${lower(oldest.eventType)} of ${time(oldest.occurredAt)}, reference ${oldest.referenceId}`,
      ),
    );
  return cell;
}

/** datetime-local value (taken as UTC) -> ISO 8601, or null when empty. */
const utc = (value) => (value ? new Date(`${value}Z`).toISOString() : null);

const WINDOW_ACTIONS = {
  recover: {
    label: "Recover",
    mutation: "recoverWebhookDeliveries",
    help: "Sends again the deliveries created in the window whose last attempt failed or that were given up.",
  },
  replay: {
    label: "Replay",
    mutation: "replayWebhookEvents",
    help: "Sends every event of the window that the endpoint's filters match today, under existing webhook-ids.",
  },
};

/** Where an endpoint sends: its URL, or its broker destination (URL masked by the server) and exchange or subject. */
export function target(endpoint) {
  const destination = endpoint.destination;
  if (!destination) return endpoint.url;
  return `${destination.url} ${destination.exchange ? `exchange ${destination.exchange}` : `subject ${destination.subject}`}`;
}

/**
 * Recover or replay over a window: the dialog counts first (a dry run) and sends only after the operator has
 * seen the count, with the same window.
 */
export function windowAction(kind, endpoint, { $, graphql, notify, action, load }) {
  const { label, mutation, help } = WINDOW_ACTIONS[kind];
  return action(label, async () => {
    const dialog = $("window-dialog");
    $("window-title").textContent = `${label}: ${target(endpoint)}`;
    $("window-help").textContent = help;
    $("window-count").textContent = "";
    const run = $("window-run");
    run.disabled = true;
    const since = $("window-since");
    if (!since.value) since.value = new Date(Date.now() - 86_400_000).toISOString().slice(0, 19);
    const variables = () => ({ id: endpoint.id, since: utc(since.value), until: utc($("window-until").value) });
    const query = `mutation ($id: ID!, $since: DateTime!, $until: DateTime, $dryRun: Boolean) {
      ${mutation}(endpointId: $id, since: $since, until: $until, dryRun: $dryRun) }`;
    let counted = null;
    $("window-preview").onclick = async () => {
      try {
        counted = variables();
        const data = await graphql(query, { ...counted, dryRun: true });
        $("window-count").textContent = `${data[mutation]} deliveries would be sent`;
        run.disabled = data[mutation] === 0;
      } catch (error) {
        $("window-count").textContent = error.message;
        run.disabled = true;
      }
    };
    since.oninput = $("window-until").oninput = () => {
      run.disabled = true;
      $("window-count").textContent = "";
    };
    run.onclick = async () => {
      try {
        const data = await graphql(query, { ...counted, dryRun: false });
        notify(`${label}: ${data[mutation]} deliveries queued`, "info");
        dialog.close();
        await load();
      } catch (error) {
        $("window-count").textContent = error.message;
      }
    };
    $("window-cancel").onclick = () => dialog.close();
    dialog.showModal();
  });
}
