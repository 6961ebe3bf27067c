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

/** One entry of an allow-list: a range, and the one port it allows (null: every port). */
interface AllowedRange {
  readonly range: Address;
  readonly bits: number;
  readonly port: number | null;
}

/** `[ADDRESS[/BITS]]:PORT`, the form an IPv6 entry with a port takes. */
const BRACKETED = /^\[([^\]]+)\](?::([0-9]{1,5}))?$/;

/** Parses `ADDRESS[/BITS][:PORT]` (IPv6 with a port in brackets). @throws Error naming `setting`. */
function parseAllowedRange(entry: string, setting: string): AllowedRange {
  const refuse = () => new Error(`${setting}: "${entry}" is not an IP address or CIDR range, with an optional :port`);
  let host = entry;
  let portText: string | undefined;
  const bracketed = BRACKETED.exec(entry);
  if (bracketed) [, host = "", portText] = bracketed;
  else if (entry.split(":").length === 2) [host = "", portText] = entry.split(":");
  const port = portText === undefined ? null : Number(portText);
  if (port !== null && !(Number.isInteger(port) && port >= 1 && port <= 65_535)) throw refuse();
  try {
    if (host.includes("/")) {
      const [range, bits] = ipaddr.parseCIDR(host);
      return { range, bits, port };
    }
    const range = ipaddr.parse(host);
    return { range, bits: range.kind() === "ipv4" ? 32 : 128, port };
  } catch {
    throw refuse();
  }
}

export class RefusedTargetError extends Error {
  override readonly name = "RefusedTargetError";
  readonly code = "ERR_WEBHOOK_TARGET_REFUSED";
}

export class AddressGuard {
  private readonly allowed: readonly AllowedRange[];
  /** Lookups by port: an allow-list entry may name a port, which node:net does not pass to a lookup. */
  private readonly lookups = new Map<number | undefined, LookupFunction>();

  /**
   * `allowedRanges`: entries `ADDRESS[/BITS][:PORT]` of the setting named `setting`.
   * @throws Error naming the setting when an entry is malformed.
   */
  constructor(allowedRanges: readonly string[], setting = "WEBHOOK_ALLOWED_CIDRS") {
    this.allowed = allowedRanges.map((entry) => parseAllowedRange(entry, setting));
  }

  /**
   * Why a connection to this IP address (on `port`, when known) is refused, or null when it is allowed. An
   * allow-list entry with a port allows only connections known to go to that port.
   */
  refusalReason(address: string, port?: number): string | null {
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
        const kind = this.refusedKind(carried, port);
        if (kind) return `${address} carries ${carried.toString()}, a ${kind} address`;
        // ::ffff:a.b.c.d is how the system itself writes an IPv4 address in IPv6: it is that address.
        if ((parsed as ipaddr.IPv6).isIPv4MappedAddress()) return null;
      }
    }
    const kind = this.refusedKind(parsed, port);
    return kind && `${address} is a ${kind} address`;
  }

  /** The kind of address (loopback, private, ...) that makes `parsed` refused, or null when it is allowed. */
  private refusedKind(parsed: Address, port: number | undefined): string | null {
    for (const { range, bits, port: allowedPort } of this.allowed) {
      if (allowedPort !== null && allowedPort !== port) continue;
      if (range.kind() === parsed.kind() && parsed.match(range, bits)) return null;
    }
    const kind = parsed.range();
    return kind === "unicast" ? null : kind;
  }

  /** A `dns.lookup` for connections to `port` that fails when any address of the name is refused. */
  lookupFor(port?: number): LookupFunction {
    let lookup = this.lookups.get(port);
    if (!lookup) {
      if (this.lookups.size >= MAX_LOOKUPS) this.lookups.clear();
      lookup = (hostname, options, callback) => this.guardedLookup(port, hostname, options, callback);
      this.lookups.set(port, lookup);
    }
    return lookup;
  }

  private guardedLookup(port: number | undefined, ...[hostname, options, callback]: Parameters<LookupFunction>): void {
    const all: LookupAllOptions = { ...(options as LookupOptions), all: true };
    dnsLookup(hostname, all, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, "", 0);
      for (const { address } of addresses) {
        const reason = this.refusalReason(address, port);
        if (reason) return callback(new RefusedTargetError(`${hostname} resolves to ${reason}`), "", 0);
      }
      if ((options as LookupOptions).all)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const [first] = addresses;
      if (!first) return callback(new RefusedTargetError(`${hostname} has no address`), "", 0);
      callback(null, first.address, first.family);
    });
  }
}

/** Lookups kept by port: tenants choose ports, so the map is bounded. */
const MAX_LOOKUPS = 1_024;

/** The port a URL connects to: its own, or its scheme's default. */
export function portOf(url: URL): number | undefined {
  return url.port === "" ? DEFAULT_PORTS[url.protocol] : Number(url.port);
}

const DEFAULT_PORTS: Readonly<Record<string, number>> = {
  "http:": 80,
  "https:": 443,
  "amqp:": 5672,
  "amqps:": 5671,
  "nats:": 4222,
  "tls:": 4222,
};

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
  /** `http`: HTTP endpoints' guard (WEBHOOK_ALLOWED_CIDRS); `broker`: RabbitMQ and NATS destinations'. */
  constructor(private readonly guards: { readonly http: AddressGuard; readonly broker: AddressGuard }) {}

  async refusalReason(url: URL): Promise<string | null> {
    const guard = url.protocol === "http:" || url.protocol === "https:" ? this.guards.http : this.guards.broker;
    const port = portOf(url);
    // A fully qualified name may end with a dot (`localhost.`): the same name for every resolver.
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.+$/, "");
    if (isIP(host) !== 0) return guard.refusalReason(host, port);
    // "localhost" and every name under it are loopback by definition (RFC 6761 §6.3), whatever DNS says;
    // judged without a lookup, so that a resolver that does not know `localhost.` cannot let one through.
    if (LOOPBACK_NAME.test(host)) {
      const reason = guard.refusalReason("127.0.0.1", port) ?? guard.refusalReason("::1", port);
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
        const reason = guard.refusalReason(address, port);
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
