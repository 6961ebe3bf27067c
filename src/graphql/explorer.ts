/**
 * The page of the self-hosted GraphQL explorer (GraphiQL) at the GraphQL endpoint; its files are served by
 * explorer-assets.ts.
 *
 * First use: the page asks for the API key in its own bar before GraphiQL starts (GraphiQL introspects as it
 * starts, which without a key could only fail), checks it once, keeps it in localStorage (saying so, with a
 * "Forget key" button) and hands it to GraphiQL for every HTTP request and as graphql-ws connectionParams.
 */
import type { FastifyRequest } from "fastify";
import {
  BUNDLE_FILE,
  checkEndpoint,
  type ExplorerOptions,
  mediaRanks,
  PACKAGE_VERSION,
  STYLES_FILE,
  WORKER_FILES,
} from "./explorer-assets.ts";

const DEFAULT_QUERY = `query {
  tags(first: 10) {
    edges {
      node {
        id
        name
      }
    }
  }
}
`;

/** Where the page keeps the API key between visits (see the key bar in {@link renderExplorerPage}). */
const API_KEY_STORAGE_KEY = "reftrail.explorer.apiKey";

/** Where GraphiQL keeps its tabs (its storage namespace "graphiql" and key "tabState"). */
const GRAPHIQL_TAB_STATE_KEY = "graphiql:tabState";

/**
 * The explorer's HTML page. It loads only the assets served by {@link registerExplorer} (same origin), sends
 * queries to `endpoint` and subscriptions over graphql-ws to `ws(s)://<current host><endpoint>`.
 */
export function renderExplorerPage(options: ExplorerOptions): string {
  const endpoint = checkEndpoint(options.endpoint);
  const assetBase = `${endpoint}/explorer/`;
  const version = encodeURIComponent(PACKAGE_VERSION);
  const assetUrl = (file: string): string => `${assetBase}${file}?v=${version}`;

  const workers = {
    editor: assetUrl(WORKER_FILES.editor),
    json: assetUrl(WORKER_FILES.json),
    graphql: assetUrl(WORKER_FILES.graphql),
  };
  const config = {
    endpoint,
    defaultQuery: DEFAULT_QUERY,
    storageKey: API_KEY_STORAGE_KEY,
    tabStateKey: GRAPHIQL_TAB_STATE_KEY,
  };

  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>reftrail GraphQL explorer</title>
    <!-- An empty icon stops the browser asking for /favicon.ico. -->
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="${escapeHtml(assetUrl(STYLES_FILE))}" />
    <style>
      html, body { height: 100%; margin: 0; }
      [hidden] { display: none !important; }
      body { display: flex; flex-direction: column; font: 14px/1.4 system-ui, sans-serif; color: #1b2240; }
      #explorer { flex: 1; min-height: 0; }
      #key-bar { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 12px; padding: 8px 16px;
        background: #f3f5fa; border-bottom: 1px solid #d8dce8; }
      #key-bar form { display: contents; }
      #key-bar input { flex: 0 1 28em; padding: 5px 8px; border: 1px solid #b8bfd3; border-radius: 4px; font: inherit; }
      #key-bar button { padding: 5px 12px; border: 1px solid #8a93b0; border-radius: 4px; background: #fff; font: inherit;
        cursor: pointer; }
      #key-bar code { background: #e4e8f2; padding: 0 4px; border-radius: 3px; }
      #key-error { color: #b00020; }
      #key-welcome { max-width: 44em; margin: 48px auto; padding: 0 16px; }
      #key-welcome h1 { font-size: 22px; }
    </style>
  </head>
  <body>
    <noscript>The GraphQL explorer needs JavaScript.</noscript>
    <div id="key-bar" role="region" aria-label="API key">
      <form id="key-form" hidden>
        <label for="api-key">API key</label>
        <input id="api-key" name="api-key" type="password" autocomplete="off" spellcheck="false"
          placeholder="rt_…" required />
        <button type="submit">Use this key</button>
        <span>It is kept in this browser (localStorage) until you forget it.</span>
        <span id="key-error" role="alert"></span>
      </form>
      <span id="key-status" hidden>
        Using API key <code id="key-hint"></code>, remembered in this browser (localStorage).
        <button id="forget-key" type="button">Forget key</button>
      </span>
    </div>
    <div id="key-welcome" hidden>
      <h1>reftrail GraphQL explorer</h1>
      <p>Every request needs an API key of your organization. Paste it in the <b>API key</b> field above.</p>
      <p>The server printed one when it first started on an empty database (the line <code>API key (shown once,
        store it now)</code>). You can issue another with <code>node bin/reftrail.mjs key create &lt;organization_id&gt;</code>.</p>
      <p>The schema, the documentation and your queries appear as soon as the key is accepted.</p>
    </div>
    <div id="explorer" hidden></div>
    <script>
      // Must exist before Monaco starts its first editor. The package's workers are classic (non-module)
      // scripts, so they are created here as classic workers; Monaco's own fallback would start them as
      // module workers from a URL it cannot know.
      (function () {
        var workers = ${scriptJson(workers)};
        window.MonacoEnvironment = {
          getWorker: function (_moduleId, label) {
            if (label === "json") return new Worker(workers.json, { name: label });
            if (label === "graphql") return new Worker(workers.graphql, { name: label });
            return new Worker(workers.editor, { name: label });
          },
        };
      })();
    </script>
    <script src="${escapeHtml(assetUrl(BUNDLE_FILE))}"></script>
    <script>
      (function () {
        var config = ${scriptJson(config)};
        var wsProtocol = window.location.protocol === "https:" ? "wss:" : "ws:";
        var byId = function (id) { return document.getElementById(id); };

        // GraphiQL starts only once there is a key: it introspects the schema as it starts, and without a key
        // that request could only fail. So the first screen explains where the key goes and sends nothing.
        // The tab GraphiQL had open, from the state it saves in localStorage ("graphiql:tabState").
        function savedActiveTab() {
          try {
            var state = JSON.parse(window.localStorage.getItem(config.tabStateKey) || "null");
            var tab = state && Array.isArray(state.tabs) ? state.tabs[state.activeTabIndex] : null;
            return tab && typeof tab.query === "string" ? tab : null;
          } catch (error) {
            return null;
          }
        }

        function startExplorer(apiKey) {
          var savedTab = savedActiveTab();
          byId("key-form").hidden = true;
          byId("key-welcome").hidden = true;
          byId("key-status").hidden = false;
          byId("key-hint").textContent = apiKey.slice(0, 6) + "…";
          byId("explorer").hidden = false;
          window.YogaGraphiQL.renderYogaGraphiQL(byId("explorer"), {
            title: "reftrail",
            endpoint: config.endpoint,
            // Sent with every HTTP request (queries, mutations, the schema's introspection)...
            additionalHeaders: { "X-API-Key": apiKey },
            // ...and as graphql-ws connectionParams: subscriptions share the path of the endpoint.
            subscriptionsProtocol: "WS",
            subscriptionsEndpoint: wsProtocol + "//" + window.location.host + config.endpoint,
            connectionParams: { "x-api-key": apiKey },
            // GraphiQL reopens the saved tab whose query and variables equal the initial ones, and adds a new tab
            // when none does. Yoga always passes its welcome text, and with none GraphiQL falls back to a stored
            // "query" it no longer writes, so either way each visit would add a tab. Passing the saved active
            // tab's own text reopens it; on a first visit (nothing saved) defaultQuery fills the first tab.
            initialQuery: savedTab ? savedTab.query : undefined,
            initialVariables: savedTab ? savedTab.variables || "" : undefined,
            defaultQuery: config.defaultQuery,
            // Extra headers still work; the key is not repeated there (it would be stored with the tabs).
            defaultHeaders: "",
            shouldPersistHeaders: false,
            // Yoga mirrors the query into "?query=" on every keystroke. This page lives at the endpoint itself,
            // where a GET with a "query" parameter executes GraphQL instead of serving the page, so a reload
            // would stop showing the explorer. Passing our own handler replaces Yoga's.
            onEditQuery: function () {},
          });
        }

        function askForKey(message) {
          tried = null;
          byId("key-form").hidden = false;
          byId("key-welcome").hidden = false;
          byId("key-error").textContent = message || "";
          byId("api-key").focus();
        }

        // A key is checked before GraphiQL starts with it, so that a typo or a revoked key gets one clear answer
        // here rather than an error in every panel.
        function useKey(apiKey, rejected) {
          byId("key-error").textContent = "Checking…";
          fetch(config.endpoint, {
            method: "POST",
            headers: { "content-type": "application/json", "x-api-key": apiKey },
            body: JSON.stringify({ query: "{ __typename }" }),
          }).then(function (response) {
            if (response.status === 401) return rejected();
            if (!response.ok) return askForKey("The server answered " + response.status + "; try again.");
            try {
              window.localStorage.setItem(config.storageKey, apiKey);
            } catch (error) {
              // Storage may be disabled; the key then lasts until the page is left.
            }
            startExplorer(apiKey);
          }, function () {
            askForKey("The server could not be reached; try again.");
          });
        }

        // The key in the field is used when it is submitted (Enter, the button), pasted, or left after typing
        // (its change event); not on every keystroke, which would check half a key. A key already being
        // checked or in use is not checked again.
        var tried = null;
        function useTypedKey() {
          var apiKey = byId("api-key").value.trim();
          if (!apiKey || apiKey === tried) return;
          tried = apiKey;
          useKey(apiKey, function () {
            askForKey("This key is not valid (unknown or revoked). Check that you pasted all of it.");
          });
        }
        byId("key-form").addEventListener("submit", function (event) {
          event.preventDefault();
          useTypedKey();
        });
        byId("api-key").addEventListener("input", function (event) {
          if (event.inputType === "insertFromPaste" || event.inputType === "insertFromDrop") useTypedKey();
        });
        byId("api-key").addEventListener("change", useTypedKey);

        function forgetKey() {
          try {
            window.localStorage.removeItem(config.storageKey);
          } catch (error) {
            // Nothing was stored.
          }
        }

        byId("forget-key").addEventListener("click", function () {
          forgetKey();
          window.location.reload();
        });

        var remembered = null;
        try {
          remembered = window.localStorage.getItem(config.storageKey);
        } catch (error) {
          remembered = null;
        }
        if (!remembered) askForKey();
        else
          useKey(remembered, function () {
            forgetKey();
            askForKey("The key remembered in this browser is no longer valid (revoked?); paste another one.");
          });
      })();
    </script>
  </body>
</html>
`;
}

/**
 * True when a request to the endpoint should get the explorer page instead of a GraphQL response: a GET
 * without a `query` parameter (with one it is a GraphQL-over-HTTP GET) whose Accept header ranks text/html
 * above the JSON media types. Browsers navigating to the URL list text/html explicitly; GraphQL clients and
 * curl send JSON types or a wildcard, and a wildcard is deliberately not counted as asking for HTML.
 */
export function wantsExplorerPage(request: FastifyRequest): boolean {
  if (request.method !== "GET") return false;
  const query: unknown = request.query;
  // An operation, by its text or by a registered document's id, is answered as GraphQL whatever the Accept header.
  if (
    typeof query === "object" &&
    query !== null &&
    (Object.hasOwn(query, "query") || Object.hasOwn(query, "documentId"))
  )
    return false;
  const accept = request.headers.accept;
  if (accept === undefined) return false;
  const ranks = mediaRanks(accept);
  const html = ranks.get("text/html") ?? 0;
  const json = Math.max(ranks.get("application/json") ?? 0, ranks.get("application/graphql-response+json") ?? 0);
  // A tie goes to JSON: the endpoint is an API first.
  return html > 0 && html > json;
}

/** JSON that is safe inside an inline <script>: "<" can never start "</script>" or "<!--". */
function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
