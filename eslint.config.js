// Lint rules that keep the code honest: no floating promises, type-only imports marked as such, named exports
// only, and the layers (adapters -> domain <- store) as far as an import string shows them. The layers by resolved
// path, src/webhooks/ included, and the ban on import circles are held by dependency-cruiser
// (.dependency-cruiser.cjs), which `npm run lint` runs after eslint. Tests run on jest and import
// describe/it/expect from @jest/globals, so no test globals are declared here.
import tseslint from "typescript-eslint";

const outsideDomain = ["**/store/**", "**/rest/**", "**/graphql/**", "**/cli/**", "**/app.ts", "**/build-services.ts"];
// Folders beside the domain that share a room's name (domain/live, domain/webhooks) are matched only as a relative
// path that climbs straight out of the importing folder into src/<name>/, so "../../domain/live/…" stays allowed.
const adapterFolders = "(rest|graphql|read-cache|admission|trusted-documents|live|webhooks|operator|cli)";
const aboveTheStore = [
  `^(\\.\\./)+${adapterFolders}/`,
  "^(\\.\\./)+(app|main|build-services|operations|authentication|logging|start-screen|config)\\.ts$",
];

export default tseslint.config(
  { ignores: ["node_modules/**", "src/**/__generated__/**", "test/**/__generated__/**", "data/**", "bench/results*"] },
  {
    files: ["src/**/*.ts", "test/**/*.ts", "bench/**/*.ts", "scripts/**/*.ts"],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "no-restricted-syntax": ["error", { selector: "ExportDefaultDeclaration", message: "Use named exports." }],
    },
  },
  {
    files: ["src/domain/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: outsideDomain,
              message: "The domain depends on nothing outside it; the store and adapters depend on the domain.",
            },
            { group: ["@prisma/*", "fastify", "graphql", "@apollo/*"], message: "The domain is framework-free." },
          ],
        },
      ],
    },
  },
  {
    files: ["src/store/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex: aboveTheStore[0],
              message: "The store implements the domain's ports; it sits below every adapter.",
            },
            {
              regex: aboveTheStore[1],
              message: "The store imports nothing but the domain: no composition root, configuration or adapter.",
            },
          ],
        },
      ],
    },
  },
  {
    files: [
      "src/rest/**/*.ts",
      "src/graphql/**/*.ts",
      "src/read-cache/**/*.ts",
      "src/admission/**/*.ts",
      "src/trusted-documents/**/*.ts",
      "src/live/**/*.ts",
      "src/webhooks/**/*.ts",
      "src/operator/**/*.ts",
      "src/cli/**/*.ts",
      "src/operations.ts",
      "src/authentication.ts",
      "src/logging.ts",
      "src/start-screen.ts",
      "src/config.ts",
    ],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["**/store/**"],
              message:
                "Adapters and processes call domain services; only the composition root (main.ts, app.ts, build-services.ts) wires the store.",
            },
          ],
        },
      ],
    },
  },
);
