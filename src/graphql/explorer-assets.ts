/**
 * The files of the self-hosted GraphQL explorer (GraphiQL), served so that the explorer works with no internet
 * access (the page itself: explorer.ts).
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
 */
import { createReadStream } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, extname, join, relative, sep } from "node:path";
import { promisify } from "node:util";
import { gzip as gzipCallback } from "node:zlib";
import type { FastifyInstance } from "fastify";

const gzip = promisify(gzipCallback);

const require = createRequire(import.meta.url);
// The package's "exports" only exposes "." and "./package.json"; resolving package.json is the stable way to
// find the folder, and its version doubles as the cache-busting token for the asset URLs.
const PACKAGE_JSON_PATH = require.resolve("@graphql-yoga/graphiql/package.json");
export const PACKAGE_VERSION = (require(PACKAGE_JSON_PATH) as { version: string }).version;
const ASSET_ROOT = join(dirname(PACKAGE_JSON_PATH), "dist");

// Paths relative to ASSET_ROOT, as the page requests them below `${endpoint}/explorer/`.
export const BUNDLE_FILE = "yoga-graphiql.umd.js";
export const STYLES_FILE = "graphiql.css";
export const WORKER_FILES = {
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

/** Rejects values that would produce odd routes ("//explorer/*") or break out of the URL paths we build. */
export function checkEndpoint(endpoint: string): string {
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
export function mediaRanks(header: string): Map<string, number> {
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
