import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { FastifyInstance } from "fastify";

/*
 * The operator page for webhooks, served at `/operator` from the server's own files (it works with no internet):
 * a plain HTML page, a stylesheet and two ES modules with no build step (src/operator/assets/), plus graphql-ws's
 * own browser build from node_modules for the live subscription. The page asks for an API key, keeps it in the
 * browser's localStorage, and talks to the GraphQL API (`/graphql`, and `webhookDeliveryAttempts` over
 * graphql-ws) like any client: the routes here serve files only and need no key.
 */

export const OPERATOR_PATH = "/operator";

// The assets are not compiled: read them from src/ whether this module runs from src/operator (tsx) or from
// dist/operator (`npm start`), both two levels below the package root.
const ASSETS = join(import.meta.dirname, "..", "..", "src", "operator", "assets");
const GRAPHQL_WS_BROWSER_BUILD = join(
  dirname(createRequire(import.meta.url).resolve("graphql-ws")),
  "..",
  "umd",
  "graphql-ws.min.js",
);

const FILES: Readonly<Record<string, { readonly path: string; readonly type: string }>> = {
  "operator.js": { path: join(ASSETS, "operator.js"), type: "text/javascript; charset=utf-8" },
  "operator-window.js": { path: join(ASSETS, "operator-window.js"), type: "text/javascript; charset=utf-8" },
  "operator-access.js": { path: join(ASSETS, "operator-access.js"), type: "text/javascript; charset=utf-8" },
  "operator.css": { path: join(ASSETS, "operator.css"), type: "text/css; charset=utf-8" },
  "graphql-ws.js": { path: GRAPHQL_WS_BROWSER_BUILD, type: "text/javascript; charset=utf-8" },
};

/** Registers `GET /operator` and its assets below `/operator/`. Files are read once, at startup. */
export async function registerOperatorPage(app: FastifyInstance): Promise<void> {
  const page = readFileSync(join(ASSETS, "operator.html"), "utf8");
  const assets = new Map(
    Object.entries(FILES).map(([name, file]) => [name, { ...file, body: readFileSync(file.path) }]),
  );
  const security = {
    // Only this origin: scripts, styles, and the API over HTTP and WebSocket. The page keeps the API key in
    // localStorage, so it may send it nowhere else: `connect-src 'self'` covers the page's own ws:/wss: origin in
    // browsers that follow CSP Level 3 (Chrome since 71, Safari since 16), and no other host's.
    "content-security-policy":
      "default-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  };
  app.get(OPERATOR_PATH, { schema: { hide: true } }, async (_request, reply) =>
    reply
      .headers({ ...security, "cache-control": "no-cache" })
      .type("text/html; charset=utf-8")
      .send(page),
  );
  app.get<{ Params: { name: string } }>(
    `${OPERATOR_PATH}/:name`,
    { schema: { hide: true } },
    async (request, reply) => {
      const asset = assets.get(request.params.name);
      if (!asset) return reply.code(404).type("text/plain").send("Not Found");
      return reply
        .headers({ ...security, "cache-control": "no-cache" })
        .type(asset.type)
        .send(asset.body);
    },
  );
}
