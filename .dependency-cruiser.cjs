// The floor plan, enforced (docs/architecture.md): no import circles, and dependencies that point one way —
// adapters -> domain <- store, with the composition root (main.ts, app.ts, build-services.ts) the only code that
// wires the store. `npm run lint` runs this after eslint.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "An import circle ties files that should be read and changed one at a time.",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-circular-folders",
      scope: "folder",
      severity: "error",
      comment:
        "Folders import one way too: a feature that two folders import from each other is one folder, or a " +
        "policy that belongs to the request pipeline (src/pipeline/), which imports no transport.",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "pipeline-knows-no-transport",
      severity: "error",
      comment:
        "The request pipeline's stages and policies know no transport: GraphQL (HTTP, graphql-ws, SSE) and REST " +
        "are adapters over it, never the other way (docs/architecture.md).",
      from: { path: "^src/pipeline/" },
      to: {
        path: "^src/(graphql|rest|live|operator|webhooks|cli|tracing)/|node_modules/(fastify|@fastify/|ws/|graphql-ws|graphql-sse)",
      },
    },
    {
      name: "live-runtime-knows-no-transport",
      severity: "error",
      comment: "The live runtime (feed, subscriptions) serves graphql-ws, SSE and the feed's long polls alike.",
      from: { path: "^src/live/" },
      to: { path: "^src/(graphql|rest|pipeline)/" },
    },
    {
      name: "domain-depends-on-no-outer-layer",
      severity: "error",
      comment: "The domain depends on nothing outside it; the store and adapters depend on the domain.",
      from: { path: "^src/domain/" },
      to: { path: "^src/", pathNot: "^src/domain/" },
    },
    {
      name: "domain-is-framework-free",
      severity: "error",
      comment: "The domain is framework-free: no database driver, HTTP server or GraphQL library.",
      from: { path: "^src/domain/" },
      to: {
        dependencyTypes: ["npm", "npm-dev", "npm-optional", "npm-peer", "npm-no-pkg", "npm-unknown"],
        path: "node_modules/(@prisma/|prisma/|fastify|@fastify/|graphql|@graphql-tools/|@apollo/|pg/|better-sqlite3/)",
      },
    },
    {
      name: "store-sits-below-adapters",
      severity: "error",
      comment:
        "The store implements the domain's ports and imports nothing but the domain: no adapter, process, " +
        "configuration or composition root.",
      from: { path: "^src/store/" },
      to: { path: "^src/", pathNot: "^src/(store|domain)/" },
    },
    {
      name: "adapters-call-services-not-the-store",
      severity: "error",
      comment:
        "Adapters and processes call domain services; only the composition root (main.ts, app.ts, " +
        "build-services.ts) wires the store.",
      from: {
        path:
          "^src/(rest|graphql|pipeline|live|webhooks|operator|cli|tracing)/" +
          "|^src/(operations|logging|start-screen|config)\\.ts$",
      },
      to: { path: "^src/store/" },
    },
    {
      name: "only-entry-points-import-the-composition-root",
      severity: "error",
      comment:
        "The composition root builds the adapters, so an adapter that imported it would import itself; only the " +
        "entry points (main.ts starts the server, cli/ the command) ask it for what they run.",
      from: { path: "^src/", pathNot: "^src/(main|app)\\.ts$|^src/cli/" },
      to: { path: "^src/(app|main|build-services)\\.ts$" },
    },
    {
      name: "transports-are-siblings",
      severity: "error",
      comment: "REST and GraphQL are two thin siblings over the same services; neither imports the other.",
      from: { path: "^src/rest/" },
      to: { path: "^src/(graphql|live)/" },
    },
    {
      name: "graphql-does-not-import-rest",
      severity: "error",
      comment: "REST and GraphQL are two thin siblings over the same services; neither imports the other.",
      from: { path: "^src/(graphql|live)/" },
      to: { path: "^src/rest/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "__generated__" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".js", ".mjs", ".cjs", ".json"],
    },
  },
};
