import type { FastifyBaseLogger } from "fastify";
import type { AddressInfo } from "node:net";
import type { LogFormat } from "./config.ts";

/** The addresses a person (or a health check) starts from, for the address the server listens on. */
export function serviceUrls(address: AddressInfo): Record<"explorer" | "operator" | "openapi" | "health", string> {
  const wildcard = address.address === "0.0.0.0" || address.address === "::";
  const host = wildcard ? "localhost" : address.family === "IPv6" ? `[${address.address}]` : address.address;
  const origin = `http://${host}:${address.port}`;
  return {
    explorer: `${origin}/graphql`,
    operator: `${origin}/operator`,
    openapi: `${origin}/v1/openapi.json`,
    health: `${origin}/healthz`,
  };
}

/**
 * Printed on every start: where to go. For a terminal (`pretty`) a short block on stdout; for a log collector
 * (`json`) one record with the same addresses as fields.
 */
export function announceStart(address: AddressInfo, format: LogFormat, log: FastifyBaseLogger): void {
  const urls = serviceUrls(address);
  if (format === "json") {
    log.info(urls, `reftrail is ready: GraphQL explorer at ${urls.explorer}`);
    return;
  }
  process.stdout.write(
    [
      "",
      "reftrail is ready",
      `  GraphQL explorer  ${urls.explorer}   (open in a browser, paste an API key)`,
      `  operator page     ${urls.operator}`,
      `  REST (OpenAPI)    ${urls.openapi}`,
      `  health            ${urls.health}`,
      "",
      "",
    ].join("\n"),
  );
}
