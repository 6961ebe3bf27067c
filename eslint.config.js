// Lint rules that keep the code honest: no floating promises, type-only imports marked as such, named exports
// only, and the layers (adapters -> domain <- store) as far as an import string shows them. The layers by resolved
// path, src/webhooks/ included, and the ban on import circles are held by dependency-cruiser
// (.dependency-cruiser.cjs), which `npm run lint` runs after eslint. Tests run on jest and import
// describe/it/expect from @jest/globals, so no test globals are declared here.
import tseslint from "typescript-eslint";

const outsideDomain = ["**/store/**", "**/rest/**", "**/graphql/**", "**/cli/**", "**/app.ts"];

export default tseslint.config(
  { ignores: ["node_modules/**", "src/**/__generated__/**", "data/**", "bench/results*"] },
  {
    files: ["src/**/*.ts", "test/**/*.ts", "bench/**/*.ts"],
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
              group: ["**/rest/**", "**/graphql/**", "**/cli/**", "**/app.ts"],
              message: "The store implements the domain's ports; it sits below every adapter.",
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
      "src/live/**/*.ts",
      "src/webhooks/**/*.ts",
    ],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["**/store/**"],
              message:
                "Adapters and processes call domain services; only the composition root (app.ts) wires the store.",
            },
          ],
        },
      ],
    },
  },
);
