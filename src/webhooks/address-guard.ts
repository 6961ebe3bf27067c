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
 * link-local, unique-local, CGNAT, multicast, reserved, unspecified, and every IPv6 form that carries such an
 * IPv4 address: mapped, compatible, translated, NAT64, 6to4) is refused unless
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
      parsed = ipaddr.parse(address);
    } catch {
      return `${address} is not an IP address`;
    }
    if (parsed.kind() === "ipv6") {
      const carried = carriedIpv4(parsed as ipaddr.IPv6);
      if (carried) {
        // An IPv6 address that carries an IPv4 one is judged as that IPv4 address first: `::7f00:1`
        // (`::127.0.0.1`) is loopback however it is written.
        const kind = this.refusedKind(carried);
        if (kind) return `${address} carries ${carried.toString()}, a ${kind} address`;
        // ::ffff:a.b.c.d is how the system itself writes an IPv4 address in IPv6: it is that address.
        if ((parsed as ipaddr.IPv6).isIPv4MappedAddress()) return null;
      }
    }
    const kind = this.refusedKind(parsed);
    return kind && `${address} is a ${kind} address`;
  }

  /** The kind of address (loopback, private, ...) that makes `parsed` refused, or null when it is allowed. */
  private refusedKind(parsed: Address): string | null {
    for (const [range, bits] of this.allowed) {
      if (range.kind() === parsed.kind() && parsed.match(range, bits)) return null;
    }
    const kind = parsed.range();
    return kind === "unicast" ? null : kind;
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

/**
 * The IPv4 address an IPv6 address carries in one of the forms that embed one, or null: IPv4-compatible
 * (`::a.b.c.d`, deprecated, RFC 4291), IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`,
 * RFC 2765), the NAT64 well-known prefix (`64:ff9b::a.b.c.d`, RFC 6052) and 6to4 (`2002:AABB:CCDD::/48`,
 * RFC 3056). `::` and `::1` carry none: they are IPv6's own unspecified and loopback addresses.
 */
function carriedIpv4(address: ipaddr.IPv6): ipaddr.IPv4 | null {
  const parts = address.parts;
  const zero = (from: number, to: number) => parts.slice(from, to).every((part) => part === 0);
  const ipv4 = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  const [p0, p1, p2, , p4, p5, p6, p7] = parts as [number, number, number, number, number, number, number, number];
  if (zero(0, 5) && (p5 === 0xffff || (p5 === 0 && (p6 !== 0 || p7 > 1)))) return ipv4(p6, p7);
  if (zero(0, 4) && p4 === 0xffff && p5 === 0) return ipv4(p6, p7);
  if (p0 === 0x64 && p1 === 0xff9b && zero(2, 6)) return ipv4(p6, p7);
  if (p0 === 0x2002) return ipv4(p1, p2);
  return null;
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
