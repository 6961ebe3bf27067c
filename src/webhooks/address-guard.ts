import {
  lookup as dnsLookup,
  promises as dnsPromises,
  type LookupAddress,
  type LookupAllOptions,
  type LookupOptions,
} from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";
import type { WebhookTargetPolicy } from "../domain/webhooks/endpoint-url.ts";

/*
 * The SSRF guard of webhook requests: an address that is not public unicast (private, loopback,
 * link-local, unique-local, CGNAT, multicast, reserved, unspecified, IPv4-mapped private, ...) is refused unless
 * it lies in one of the allowed ranges (WEBHOOK_ALLOWED_CIDRS). It is applied when an endpoint is saved and at
 * every connection, after DNS resolution, so that a name which later resolves to a private address (DNS
 * rebinding) is still refused.
 *
 * request-filtering-agent implements the same idea, but with an allow-list holding both IPv4 and IPv6 ranges (the
 * default `127.0.0.0/8,::1/128`) it prints a warning for every connection to an address of the other family
 * (ipaddr.js refuses to match across families), so the check is done here with ipaddr.js directly.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;

export class RefusedTargetError extends Error {
  override readonly name = "RefusedTargetError";
  readonly code = "ERR_WEBHOOK_TARGET_REFUSED";
}

export class AddressGuard {
  private readonly allowed: readonly [Address, number][];

  /** @throws Error naming the setting when a range is malformed. */
  constructor(allowedRanges: readonly string[]) {
    this.allowed = allowedRanges.map((range): [Address, number] => {
      try {
        if (range.includes("/")) return ipaddr.parseCIDR(range);
        const address = ipaddr.parse(range);
        return [address, address.kind() === "ipv4" ? 32 : 128];
      } catch {
        throw new Error(`WEBHOOK_ALLOWED_CIDRS: "${range}" is not an IP address or CIDR range`);
      }
    });
  }

  /** Why a connection to this IP address is refused, or null when it is allowed. */
  refusalReason(address: string): string | null {
    let parsed: Address;
    try {
      // process() turns an IPv4-mapped IPv6 address (::ffff:10.0.0.1) into the IPv4 address it carries.
      parsed = ipaddr.process(address);
    } catch {
      return `${address} is not an IP address`;
    }
    for (const [range, bits] of this.allowed) {
      if (range.kind() === parsed.kind() && parsed.match(range, bits)) return null;
    }
    const kind = parsed.range();
    return kind === "unicast" ? null : `${address} is a ${kind} address`;
  }

  /** A `dns.lookup` for node:http that fails when any address of the name is refused. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    const all: LookupAllOptions = { ...(options as LookupOptions), all: true };
    dnsLookup(hostname, all, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, "", 0);
      for (const { address } of addresses) {
        const reason = this.refusalReason(address);
        if (reason) return callback(new RefusedTargetError(`${hostname} resolves to ${reason}`), "", 0);
      }
      if ((options as LookupOptions).all)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const [first] = addresses;
      if (!first) return callback(new RefusedTargetError(`${hostname} has no address`), "", 0);
      callback(null, first.address, first.family);
    });
  };
}

const LOOKUP_TIMEOUT_MS = 3_000;

/** `localhost` and `*.localhost`, in any case (the URL parser has lower-cased it already). */
const LOOPBACK_NAME = /^(?:.+\.)?localhost$/i;

/**
 * The check at save time: an IP literal is judged as it is; a name is resolved and refused if any of its
 * addresses is. A name that does not resolve now is accepted: every connection is checked again anyway.
 */
export class DnsTargetPolicy implements WebhookTargetPolicy {
  constructor(private readonly guard: AddressGuard) {}

  async refusalReason(url: URL): Promise<string | null> {
    // A fully qualified name may end with a dot (`localhost.`): the same name for every resolver.
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.+$/, "");
    if (isIP(host) !== 0) return this.guard.refusalReason(host);
    // "localhost" and every name under it are loopback by definition (RFC 6761 §6.3), whatever DNS says;
    // judged without a lookup, so that a resolver that does not know `localhost.` cannot let one through.
    if (LOOPBACK_NAME.test(host)) {
      const reason = this.guard.refusalReason("127.0.0.1") ?? this.guard.refusalReason("::1");
      return reason && `${url.hostname} is a loopback name (${reason})`;
    }
    let timer: NodeJS.Timeout | undefined;
    try {
      const addresses = await Promise.race([
        dnsPromises.lookup(host, { all: true }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error("lookup timed out")), LOOKUP_TIMEOUT_MS);
        }),
      ]);
      for (const { address } of addresses) {
        const reason = this.guard.refusalReason(address);
        if (reason) return `${host} resolves to ${reason}`;
      }
      return null;
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
    }
  }
}
