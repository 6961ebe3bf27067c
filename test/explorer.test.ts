/**
 * End-to-end check that the GraphQL explorer renders and runs queries and subscriptions with no internet: the
 * real reftrail server (on SQLite, with an API key), real headless Chromium (see test/support/browser.ts), and
 * every request that leaves 127.0.0.1 blocked and counted.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, BrowserContext, Locator, Page } from "playwright-core";
import { describe, it, expect, beforeAll, afterAll } from "@jest/globals";
import { describeInBrowser, launchBrowser } from "./support/browser.ts";
import { expectEventually } from "./support/expect-eventually.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";

const ENDPOINT = "/graphql";

/** A tag the server holds, so that a query has something recognisable to return. */
const TAG_NAME = "explorer-check";
const QUERY = "{ tags(first: 10) { edges { node { name } } } }";
const EXPECTED_RESPONSE = /"name":\s*"explorer-check"/;

/** A browser would ask for the page like this. */
const BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

/** GET with the path sent exactly as written: fetch() would normalise "../" away before it reaches the server. */
function rawGet(origin: string, path: string): Promise<{ status: number }> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, method: "GET" }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0 }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Monaco renders spaces as U+00A0 and splits lines into separate nodes. */
function editorText(raw: string): string {
  return raw.replace(/\u00a0/g, " ").trim();
}

function isLocal(url: string): boolean {
  const { protocol, hostname } = new URL(url);
  return protocol === "data:" || protocol === "blob:" || hostname === "127.0.0.1";
}

describe("GraphQL explorer", () => {
  let server: TestServer;
  let host: { readonly origin: string };
  // Screenshots render the page as a person would see it (a render error shows there); they go to a folder of
  // this run's own, removed with everything in it once the file's tests are done.
  let screenshots: string;
  let screenshotPath: string;
  let firstScreenPath: string;

  beforeAll(async () => {
    screenshots = await mkdtemp(join(tmpdir(), "reftrail-explorer-"));
    screenshotPath = join(screenshots, "explorer.png");
    firstScreenPath = join(screenshots, "explorer-first-screen.png");
    server = await startTestServer("sqlite", {
      env: { SUBSCRIPTION_POLL_INTERVAL: "200ms" },
    });
    host = { origin: server.url };
    await server.app.services.tags.createTag(server.organizationId, TAG_NAME);
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    if (screenshots) await rm(screenshots, { recursive: true, force: true });
  });

  it("serves a page and assets that load nothing from outside the server", async () => {
    const response = await fetch(`${host.origin}${ENDPOINT}`, { headers: { accept: BROWSER_ACCEPT } });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await response.text();
    expect(html).not.toMatch(/https?:\/\//);

    // Every script and stylesheet the page names, plus the worker URLs it hands to Monaco.
    const urls = [
      ...new Set(
        [...html.matchAll(/(?:src|href)="([^"]+)"|"(\/[^"]*\.js\?v=[^"]*)"/g)]
          .map((match) => (match[1] ?? match[2] ?? "").replace(/&amp;/g, "&"))
          .filter((url) => !url.startsWith("data:")),
      ),
    ];
    expect(urls.some((url) => url.includes("/explorer/") && url.includes(".css"))).toBe(true);
    expect(urls.filter((url) => url.includes("worker"))).toHaveLength(3);

    expect(urls.filter((url) => !url.startsWith(`${ENDPOINT}/explorer/`))).toEqual([]);
    for (const url of urls) {
      const asset = await fetch(`${host.origin}${url}`);
      expect({ url, status: asset.status, contentType: asset.headers.get("content-type") }).toEqual({
        url,
        status: 200,
        contentType: expect.stringMatching(/^text\/(javascript|css)/),
      });
      const body = await asset.text();
      // Remote loads a bundle could trigger by itself; plain links to docs in strings are fine.
      const remoteLoads = [
        /@import\s+(url\()?["']?https?:/i,
        /url\(\s*["']?https?:/i,
        /importScripts\(\s*["'`]https?:/,
        /import\(\s*["'`]https?:/,
        /<(script|link)[^>]+(src|href)=\\?["']https?:/i,
      ].filter((pattern) => pattern.test(body));
      expect({ url, remoteLoads }).toEqual({ url, remoteLoads: [] });
    }
  });

  it("serves only files from the asset folder", async () => {
    const known = await rawGet(host.origin, `${ENDPOINT}/explorer/graphiql.css`);
    expect(known.status).toBe(200);
    for (const path of [
      `${ENDPOINT}/explorer/../package.json`,
      `${ENDPOINT}/explorer/../../package.json`,
      `${ENDPOINT}/explorer/%2e%2e/package.json`,
      `${ENDPOINT}/explorer/..%2fpackage.json`,
      `${ENDPOINT}/explorer/%2e%2e%2f%2e%2e%2f%2e%2e%2fpackage.json`,
      `${ENDPOINT}/explorer/monacoeditorwork/../../package.json`,
      `${ENDPOINT}/explorer//etc/passwd`,
      `${ENDPOINT}/explorer/%2fetc%2fpasswd`,
      `${ENDPOINT}/explorer/`,
      `${ENDPOINT}/explorer/monacoeditorwork`,
    ]) {
      const { status } = await rawGet(host.origin, path);
      expect({ path, refused: status === 400 || status === 404 || `answered ${status}` }).toEqual({
        path,
        refused: true,
      });
    }
  });

  it("serves the page only to browser navigations", async () => {
    const page = (accept: string, search = "") =>
      fetch(`${host.origin}${ENDPOINT}${search}`, { headers: { accept } }).then(
        (r) => r.headers.get("content-type") ?? "",
      );
    expect(await page(BROWSER_ACCEPT)).toMatch(/^text\/html/);
    expect(await page("text/html")).toMatch(/^text\/html/);
    expect(await page("application/graphql-response+json, application/json")).not.toMatch(/^text\/html/);
    expect(await page("*/*")).not.toMatch(/^text\/html/);
    expect(await page("text/html;q=0.5, application/json")).not.toMatch(/^text\/html/);
    expect(await page(BROWSER_ACCEPT, `?query=${encodeURIComponent(QUERY)}`)).not.toMatch(/^text\/html/);
  });

  describeInBrowser("in headless Chromium", () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchBrowser();
    }, 60_000);
    afterAll(async () => {
      await browser?.close();
    });

    it("first use: explains where the key goes, loads the schema once it is given, remembers it", async () => {
      await withIsolatedBrowser(browser, async ({ context, blocked, seen }) => {
        const page = await context.newPage();
        const pageErrors: string[] = [];
        page.on("pageerror", (error) => pageErrors.push(error.message));
        const graphqlRequests = () => seen.filter((url) => new URL(url).pathname === ENDPOINT).length;

        // The first screen: where the key goes and where it came from; no error, and nothing asked of the API.
        await page.goto(`${host.origin}${ENDPOINT}`);
        const welcome = page.locator("#key-welcome");
        await welcome.waitFor({ state: "visible" });
        expect(await welcome.innerText()).toMatch(/API key/);
        expect(await welcome.innerText()).toMatch(/printed one when it first started/);
        expect(await page.locator("#key-bar").innerText()).toMatch(/kept in this browser \(localStorage\)/);
        expect(await page.locator("body").innerText()).not.toMatch(/invalid|revoked|error/i);
        expect(graphqlRequests()).toBe(1);
        await page.screenshot({ path: firstScreenPath });

        // A wrong key gets one clear answer, and is not kept.
        await enterApiKey(page, "rt_not-a-real-key");
        await expectEventually(
          () => page.locator("#key-error").innerText(),
          (text) => expect(text).toMatch(/not valid/),
        );
        expect(await page.evaluate("window.localStorage.length")).toBe(0);

        // The right key: GraphiQL starts and its Docs panel shows the schema, with no reload.
        await enterApiKey(page, server.apiKey);
        const docs = await openDocs(page);
        await expectEventually(
          () => docs.innerText(),
          (text) => expect(text).toMatch(/Query/),
          { timeoutMs: 30_000 },
        );
        expect(await docs.innerText()).not.toMatch(/Error fetching schema/);
        await page.screenshot({ path: screenshotPath });

        // Reload: still authenticated, straight into GraphiQL, the schema there again.
        await page.reload();
        await page.locator(".graphiql-query-editor .monaco-editor").waitFor({ state: "visible", timeout: 30_000 });
        expect(await page.locator("#key-form").isVisible()).toBe(false);
        expect(await page.locator("#key-status").innerText()).toMatch(/remembered in this browser/);
        const docsAgain = await openDocs(page);
        await expectEventually(
          () => docsAgain.innerText(),
          (text) => expect(text).toMatch(/Query/),
          { timeoutMs: 30_000 },
        );

        // Forget: back to the first screen, nothing stored.
        await page.getByRole("button", { name: "Forget key" }).click();
        await page.locator("#key-welcome").waitFor({ state: "visible" });
        expect(await page.evaluate('window.localStorage.getItem("reftrail.explorer.apiKey")')).toBeNull();

        expect(pageErrors).toEqual([]);
        expect(blocked).toEqual([]);
      });
    }, 120_000);

    it("a pasted key is used at once, and so is a typed one when the field is left: no Enter, no click", async () => {
      await withIsolatedBrowser(browser, async ({ context, blocked }) => {
        await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: host.origin });
        const page = await context.newPage();
        const pageErrors: string[] = [];
        page.on("pageerror", (error) => pageErrors.push(error.message));
        const keyStatus = page.locator("#key-status");

        // Pasted (Ctrl+V from the clipboard, as a person does it): the explorer starts and remembers the key.
        await page.goto(`${host.origin}${ENDPOINT}`);
        const input = page.locator("#api-key");
        await input.waitFor({ state: "visible", timeout: 30_000 });
        await page.evaluate(`navigator.clipboard.writeText(${JSON.stringify(server.apiKey)})`);
        await input.focus();
        await page.keyboard.press("ControlOrMeta+V");
        await keyStatus.waitFor({ state: "visible", timeout: 30_000 });
        expect(await page.evaluate('window.localStorage.getItem("reftrail.explorer.apiKey")')).toBe(server.apiKey);

        // Typed, then the field left (its change event): used too; a half-typed key checks nothing before.
        await page.getByRole("button", { name: "Forget key" }).click();
        await input.waitFor({ state: "visible", timeout: 30_000 });
        await input.pressSequentially(server.apiKey.slice(0, 5));
        expect(await page.locator("#key-error").innerText()).toBe("");
        await input.pressSequentially(server.apiKey.slice(5));
        await input.blur();
        await keyStatus.waitFor({ state: "visible", timeout: 30_000 });
        expect(await page.evaluate('window.localStorage.getItem("reftrail.explorer.apiKey")')).toBe(server.apiKey);

        expect(pageErrors).toEqual([]);
        expect(blocked).toEqual([]);
      });
    }, 120_000);

    it("after a reload with a remembered key, reopens the tab that was open and adds none", async () => {
      await withIsolatedBrowser(browser, async ({ context, blocked }) => {
        const page = await context.newPage();
        const pageErrors: string[] = [];
        page.on("pageerror", (error) => pageErrors.push(error.message));
        const savedTabs = async () =>
          (
            JSON.parse((await page.evaluate('window.localStorage.getItem("graphiql:tabState")')) as string) as {
              tabs: { query: string | null; title: string }[];
            }
          ).tabs.map(({ query, title }) => ({ query, title }));

        const { queryEditor } = await openExplorer(page, host.origin, server.apiKey);
        const edited = "query Mine { tags(first: 1) { edges { node { name } } } }";
        await replaceQuery(page, queryEditor, edited);
        await expectEventually(savedTabs, (tabs) => expect(tabs).toEqual([{ query: edited, title: "Mine" }]));

        for (let reload = 1; reload <= 2; reload++) {
          await page.reload();
          const editorAgain = page.locator(".graphiql-query-editor .monaco-editor");
          await editorAgain.waitFor({ state: "visible", timeout: 30_000 });
          await expectEventually(
            async () => editorText(await editorAgain.locator(".view-lines").innerText()),
            (text) => expect(text).toBe(edited),
          );
          expect(await savedTabs()).toEqual([{ query: edited, title: "Mine" }]);
          expect(await page.locator("body").innerText()).not.toContain("<untitled>");
        }
        expect(pageErrors).toEqual([]);
        expect(blocked).toEqual([]);
      });
    }, 120_000);

    it("renders GraphiQL in headless Chromium and runs a query against the endpoint", async () => {
      await withIsolatedBrowser(browser, async ({ context, blocked, seen }) => {
        const page = await context.newPage();
        const pageErrors: string[] = [];
        page.on("pageerror", (error) => pageErrors.push(error.message));
        const workers: string[] = [];
        page.on("worker", (worker) => workers.push(worker.url()));

        const { queryEditor } = await openExplorer(page, host.origin, server.apiKey);
        await expectEventually(
          async () => editorText(await queryEditor.locator(".view-lines").innerText()),
          (text) => expect(text).toContain("tags(first: 10)"),
        );

        // Validation runs in the GraphQL language worker against the introspected schema, so an error marker on an
        // unknown field shows that the worker started and the schema was fetched from the endpoint.
        await replaceQuery(page, queryEditor, "{ noSuchField }");
        await queryEditor.locator(".squiggly-error").first().waitFor({ state: "attached", timeout: 15_000 });

        await replaceQuery(page, queryEditor, QUERY);
        // ...and clears once the query is valid (validation is debounced, so markers from mid-typing linger briefly).
        await expectEventually(
          () => queryEditor.locator(".squiggly-error").count(),
          (count) => expect(count).toBe(0),
          { timeoutMs: 15_000 },
        );
        const graphqlResponse = page.waitForResponse(
          (response) =>
            response.request().method() === "POST" &&
            new URL(response.url()).pathname === ENDPOINT &&
            // GraphiQL sends the query minified.
            (response.request().postData() ?? "").replace(/\s/g, "").includes("tags(first:10)"),
        );
        await page.locator(".graphiql-execute-button").click();
        const answered = await graphqlResponse;
        expect(answered.status()).toBe(200);
        // The key given in the key bar goes with every request.
        expect(await answered.request().headerValue("x-api-key")).toBe(server.apiKey);
        expect(JSON.stringify(await answered.json())).toMatch(EXPECTED_RESPONSE);

        const resultPane = page.locator(".graphiql-response .monaco-editor");
        await expectEventually(
          async () => editorText(await resultPane.innerText()),
          (text) => expect(text).toMatch(EXPECTED_RESPONSE),
          { timeoutMs: 15_000 },
        );

        await page.screenshot({ path: screenshotPath });

        // Editing must not rewrite the address to "?query=…": reloading that URL would run GraphQL, not the page.
        expect(new URL(page.url()).searchParams.has("query")).toBe(false);
        // Monaco's language services run in the package's workers; they must have started from our server.
        expect(workers.length).toBeGreaterThan(0);
        expect(workers.filter((url) => !url.startsWith(`${host.origin}${ENDPOINT}/explorer/`))).toEqual([]);
        expect(seen.some((url) => url.includes("graphql.worker"))).toBe(true);
        expect(pageErrors).toEqual([]);
        expect(blocked).toEqual([]);
      });
    }, 120_000);

    it("runs a subscription over graphql-ws on the same host and path, authenticated by the key bar", async () => {
      const { references, referenceTracking, lifecycleLog } = server.app.services;
      const reference = await references.createReference(server.organizationId, {
        bookingNumber: "BK-EXPLORER",
        carrierCode: "MAEU",
      });
      const created = await lifecycleLog.listEvents(server.organizationId, reference.id, { limit: 1 });
      // Written before the subscription starts: the subscription replays it from the cursor.
      await referenceTracking.recordExtraction(server.organizationId, reference.id, { status: "succeeded" });

      await withIsolatedBrowser(browser, async ({ context, blocked }) => {
        const sockets: string[] = [];
        await context.routeWebSocket(`${host.origin.replace(/^http/, "ws")}${ENDPOINT}`, (ws) => {
          sockets.push(ws.url());
          ws.connectToServer();
        });

        const page = await context.newPage();
        const pageErrors: string[] = [];
        page.on("pageerror", (error) => pageErrors.push(error.message));
        const { queryEditor } = await openExplorer(page, host.origin, server.apiKey);
        await replaceQuery(
          page,
          queryEditor,
          `subscription { lifecycleEvents(after: "${created.cursors[0]}") { node { type referenceId } } }`,
        );
        await page.locator(".graphiql-execute-button").click();

        const resultPane = page.locator(".graphiql-response .monaco-editor");
        await expectEventually(
          async () => editorText(await resultPane.innerText()),
          (text) => expect(text).toMatch(/"type":\s*"EXTRACTION_SUCCEEDED"/),
          { timeoutMs: 15_000 },
        );
        expect(editorText(await resultPane.innerText())).toContain(reference.id);
        // Then live: GraphiQL shows the latest message.
        await referenceTracking.recordExtraction(server.organizationId, reference.id, {
          status: "failed",
          error: { code: "E", message: "down" },
        });
        await expectEventually(
          async () => editorText(await resultPane.innerText()),
          (text) => expect(text).toMatch(/"type":\s*"EXTRACTION_FAILED"/),
          { timeoutMs: 15_000 },
        );

        expect(sockets).toEqual([`${host.origin.replace(/^http/, "ws")}${ENDPOINT}`]);
        expect(pageErrors).toEqual([]);
        expect(blocked).toEqual([]);
      });
    }, 120_000);
  });
});

interface IsolatedBrowser {
  readonly context: BrowserContext;
  /** Requests (including web workers' and WebSockets) that tried to leave 127.0.0.1; they were aborted. */
  readonly blocked: string[];
  /** Every request URL the context made. */
  readonly seen: string[];
}

/** A fresh browser context in which everything not addressed to 127.0.0.1 is blocked and recorded. */
async function withIsolatedBrowser(browser: Browser, run: (isolated: IsolatedBrowser) => Promise<void>): Promise<void> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const isolated: IsolatedBrowser = { context, blocked: [], seen: [] };
  try {
    // Context-level routes also see the requests made by the page's web workers.
    await context.route("**/*", async (route) => {
      const url = route.request().url();
      isolated.seen.push(url);
      if (isLocal(url)) return route.continue();
      isolated.blocked.push(url);
      return route.abort("blockedbyclient");
    });
    // Registered first, so a test's own, more specific WebSocket route takes precedence over this one.
    await context.routeWebSocket(/.*/, (ws) => {
      if (isLocal(ws.url().replace(/^ws/, "http"))) {
        ws.connectToServer();
        return;
      }
      isolated.blocked.push(ws.url());
      void ws.close();
    });
    await run(isolated);
  } finally {
    await context.close();
  }
}

/**
 * Opens the explorer, gives it `apiKey` in the key bar as a user would (unless the browser remembers one), and
 * waits until its query editor (a Monaco instance, so React and Monaco both started) shows.
 */
async function openExplorer(page: Page, origin: string, apiKey: string): Promise<{ queryEditor: Locator }> {
  const navigation = await page.goto(`${origin}${ENDPOINT}`);
  expect(navigation?.status()).toBe(200);
  await enterApiKey(page, apiKey);
  const queryEditor = page.locator(".graphiql-query-editor .monaco-editor");
  await queryEditor.waitFor({ state: "visible", timeout: 30_000 });
  return { queryEditor };
}

/** Pastes a key into the key bar and submits it. */
async function enterApiKey(page: Page, apiKey: string): Promise<void> {
  const input = page.locator("#api-key");
  await input.waitFor({ state: "visible", timeout: 30_000 });
  await input.fill(apiKey);
  await page.getByRole("button", { name: "Use this key" }).click();
}

/** Opens the Docs panel (GraphiQL remembers it open across reloads) and returns its content. */
async function openDocs(page: Page): Promise<Locator> {
  const docs = page.locator(".graphiql-doc-explorer");
  const toggle = page.locator('button[aria-label$="Documentation Explorer"]');
  await toggle.waitFor({ state: "visible", timeout: 30_000 });
  if (!(await docs.isVisible())) await toggle.click();
  return docs;
}

/**
 * Replaces the query by typing it key by key, as a user would. (keyboard.insertText leaves "{ hello }}": Monaco
 * auto-closes the "{" and only real key presses over-type the "}" it inserted.)
 */
async function replaceQuery(page: Page, queryEditor: Locator, query: string): Promise<void> {
  await replaceEditorText(page, queryEditor, query);
}

/** Replaces the text of any of GraphiQL's Monaco editors by typing (see {@link replaceQuery}). */
async function replaceEditorText(page: Page, editor: Locator, text: string): Promise<void> {
  await editor.locator(".view-lines").click();
  await page.keyboard.press("ControlOrMeta+A");
  await page.keyboard.press("Delete");
  await page.keyboard.type(text, { delay: 20 });
  await page.keyboard.press("Escape");
  await expectEventually(
    async () => editorText(await editor.locator(".view-lines").innerText()),
    (typed) => expect(typed).toBe(text),
  );
}
