/**
 * Self-hosted GraphQL explorer (GraphiQL) that works with no internet access.
 *
 * `@graphql-yoga/graphiql` ships a fully bundled GraphiQL 5 (React, Monaco, the explorer plugin and the
 * fonts, which are inlined into the CSS as data: URLs) in its `dist/` folder:
 *
 *   dist/yoga-graphiql.umd.js                       the app; defines `globalThis.YogaGraphiQL.renderYogaGraphiQL`
 *   dist/yoga-graphiql.es.js                        the same app as an ES module (not used by our page)
 *   dist/graphiql.css                               all styles, fonts inlined
 *   dist/monacoeditorwork/editor.worker.bundle.js   Monaco's generic editor worker
 *   dist/monacoeditorwork/json.worker.bundle.js     variables/headers editors
 *   dist/monacoeditorwork/graphql.worker..bundle.js query editor language service (note the double dot)
 *
 * The package does not tell Monaco where those workers live (the host page must set `MonacoEnvironment`), and
 * Yoga's own HTML template pulls everything from a CDN, so we serve the files ourselves and write our own page.
 *
 * Why not @fastify/static for the files: the bundle is ~5 MB and the package ships no precompressed copies, so
 * @fastify/static (whose `preCompressed` option only serves `.gz`/`.br` files found beside the originals) would
 * send it uncompressed, and @fastify/compress would gzip it again on every request. The route below gzips each
 * file once and keeps it, serves only the files listed at startup (no path ever reaches the file system), and
 * is a few dozen lines.
 *
 * First use: the page asks for the API key in its own bar before GraphiQL starts (GraphiQL introspects as it
 * starts, which without a key could only fail), checks it once, keeps it in localStorage (saying so, with a
 * "Forget key" button) and hands it to GraphiQL for every HTTP request and as graphql-ws connectionParams.
 */
import { createReadStream } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, extname, join, relative, sep } from "node:path";
import { promisify } from "node:util";
import { gzip as gzipCallback } from "node:zlib";
import type { FastifyInstance, FastifyRequest } from "fastify";

const gzip = promisify(gzipCallback);

const require = createRequire(import.meta.url);
// The package's "exports" only exposes "." and "./package.json"; resolving package.json is the stable way to
// find the folder, and its version doubles as the cache-busting token for the asset URLs.
const PACKAGE_JSON_PATH = require.resolve("@graphql-yoga/graphiql/package.json");
const PACKAGE_VERSION = (require(PACKAGE_JSON_PATH) as { version: string }).version;
const ASSET_ROOT = join(dirname(PACKAGE_JSON_PATH), "dist");

// Paths relative to ASSET_ROOT, as the page requests them below `${endpoint}/explorer/`.
const BUNDLE_FILE = "yoga-graphiql.umd.js";
const STYLES_FILE = "graphiql.css";
const WORKER_FILES = {
  editor: "monacoeditorwork/editor.worker.bundle.js",
  json: "monacoeditorwork/json.worker.bundle.js",
  graphql: "monacoeditorwork/graphql.worker..bundle.js",
} as const;

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".ttf": "font/ttf",
};

// Every asset URL carries `?v=<package version>`, so a package upgrade changes the URL and browsers may keep
// the (multi-megabyte) files forever in between.
const ASSET_CACHE_CONTROL = "public, max-age=31536000, immutable";

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

export interface ExplorerOptions {
  /** Path of the GraphQL endpoint, e.g. "/graphql". Assets are served below `${endpoint}/explorer/`. */
  readonly endpoint: string;
}

interface Asset {
  readonly path: string;
  readonly size: number;
  readonly contentType: string;
}

/**
 * Serves the GraphiQL assets under `GET ${endpoint}/explorer/*`. It does not route `GET ${endpoint}` itself:
 * the caller owns that path (it also serves GraphQL over GET) and uses {@link wantsExplorerPage} and
 * {@link renderExplorerPage} there.
 */
export async function registerExplorer(app: FastifyInstance, options: ExplorerOptions): Promise<void> {
  const endpoint = checkEndpoint(options.endpoint);
  // The folder is listed once, up front, and only listed files are ever served: a lookup in this map is the
  // path-traversal guard, so no request path is ever joined onto the file system path. (A "no '..'" rule
  // would not do anyway: one of the worker files is legitimately called "graphql.worker..bundle.js".)
  const assets = await listAssets(ASSET_ROOT);
  if (!assets.has(BUNDLE_FILE) || !assets.has(STYLES_FILE)) {
    throw new Error(`GraphQL explorer: ${ASSET_ROOT} does not contain ${BUNDLE_FILE} and ${STYLES_FILE}`);
  }
  // Compressed copies are made on first request and kept: the bundle is ~5 MB raw but ~1.5 MB gzipped.
  const gzipped = new Map<string, Promise<Buffer>>();

  app.get<{ Params: { "*": string } }>(`${endpoint}/explorer/*`, async (request, reply) => {
    const name = request.params["*"];
    const asset = assets.get(name);
    if (asset === undefined) return reply.callNotFound();

    reply
      .type(asset.contentType)
      .header("cache-control", ASSET_CACHE_CONTROL)
      .header("x-content-type-options", "nosniff")
      .header("vary", "accept-encoding");

    if (acceptsGzip(request.headers["accept-encoding"])) {
      let compressed = gzipped.get(name);
      if (compressed === undefined) {
        compressed = readFile(asset.path).then((raw) => gzip(raw));
        gzipped.set(name, compressed);
      }
      try {
        const body = await compressed;
        return reply.header("content-encoding", "gzip").header("content-length", body.length).send(body);
      } catch (error) {
        // Forget the failure so the next request retries, and still answer this one uncompressed.
        gzipped.delete(name);
        request.log.warn({ err: error, asset: name }, "explorer asset compression failed");
      }
    }
    return reply.header("content-length", asset.size).send(createReadStream(asset.path));
  });
}

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
  const config = { endpoint, defaultQuery: DEFAULT_QUERY, storageKey: API_KEY_STORAGE_KEY };

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
        store it now)</code>). You can issue another with <code>npx reftrail key create &lt;organization_id&gt;</code>.</p>
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
        function startExplorer(apiKey) {
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
            // Yoga always passes an initialQuery (its welcome text), which would open a fresh tab on every visit;
            // clearing it lets GraphiQL restore the user's saved tabs and use defaultQuery only on a first visit.
            initialQuery: undefined,
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

        byId("key-form").addEventListener("submit", function (event) {
          event.preventDefault();
          var apiKey = byId("api-key").value.trim();
          if (!apiKey) return;
          useKey(apiKey, function () {
            askForKey("This key is not valid (unknown or revoked). Check that you pasted all of it.");
          });
        });

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
  if (typeof query === "object" && query !== null && Object.hasOwn(query, "query")) return false;
  const accept = request.headers.accept;
  if (accept === undefined) return false;
  const ranks = mediaRanks(accept);
  const html = ranks.get("text/html") ?? 0;
  const json = Math.max(ranks.get("application/json") ?? 0, ranks.get("application/graphql-response+json") ?? 0);
  // A tie goes to JSON: the endpoint is an API first.
  return html > 0 && html > json;
}

/** Rejects values that would produce odd routes ("//explorer/*") or break out of the URL paths we build. */
function checkEndpoint(endpoint: string): string {
  if (!/^\/[A-Za-z0-9._~\-/]*[A-Za-z0-9._~-]$/.test(endpoint) || endpoint.includes("//")) {
    throw new TypeError(
      `GraphQL explorer: endpoint must be a path such as "/graphql", got ${JSON.stringify(endpoint)}`,
    );
  }
  return endpoint;
}

async function listAssets(root: string): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>();
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        await walk(path);
        continue;
      }
      // Files of unknown type are left out rather than served as application/octet-stream.
      const contentType = CONTENT_TYPES[extname(entry.name).toLowerCase()];
      if (!entry.isFile() || contentType === undefined) continue;
      // URL paths use "/" whatever the platform separator is.
      const name = relative(root, path).split(sep).join("/");
      assets.set(name, { path, size: (await stat(path)).size, contentType });
    }
  };
  await walk(root);
  return assets;
}

/** Media type (lower case, parameters dropped) to its highest q-value in an Accept header. */
function mediaRanks(header: string): Map<string, number> {
  const ranks = new Map<string, number>();
  for (const part of header.split(",")) {
    const [type = "", ...params] = part.split(";").map((piece) => piece.trim());
    if (type === "") continue;
    let q = 1;
    for (const param of params) {
      const match = /^q\s*=\s*([0-9.]+)$/i.exec(param);
      if (match?.[1] !== undefined) q = Number(match[1]);
    }
    if (!Number.isFinite(q)) continue;
    const key = type.toLowerCase();
    ranks.set(key, Math.max(ranks.get(key) ?? 0, q));
  }
  return ranks;
}

function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined) return false;
  const ranks = mediaRanks(header);
  return (ranks.get("gzip") ?? ranks.get("*") ?? 0) > 0;
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
