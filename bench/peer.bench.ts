/*
 * Part `peer` of `npm run bench`: reftrail against PostGraphile 4.14.1 (bench/postgraphile/, its own package
 * file, installed with `npm ci` on first use; never a dependency of reftrail) over the same PostgreSQL
 * database, the same logical queries, random keys, in alternating rounds, BENCH_PEER_ROUNDS of them: reftrail's
 * reference, PostGraphile's; reftrail's REST page, PostGraphile's page, reftrail's GraphQL page. Each round gives
 * the req/s ratio reftrail ÷ PostGraphile per query; the median of the rounds is the figure. Both servers run
 * in child processes for the whole part (the idle one waits on its socket).
 *
 * The same logical queries, in PostGraphile's generated schema:
 *   reference   `shippingReferenceById(id)` with its tags (`referenceTagsByReferenceId → tagByTagId`) and its first
 *               20 events oldest first (`lifecycleEventsByReferenceId(first: 20, orderBy: [OCCURRED_AT_ASC,
 *               ID_ASC])`, through the foreign key the server declares with a smart tag).
 *   two-tag     `allShippingReferences(first: 50, orderBy: ID_DESC, filter: { organizationId, referenceTagsBy-
 *               ReferenceId: { some: { tagByTagId: { name: { in: [A, B] } } } } })` with each reference's tags:
 *               postgraphile-plugin-connection-filter 2.3 expresses "carries A or B" through the link table as an
 *               EXISTS, newest first like reftrail's page. It is compared with reftrail's REST page and with its
 *               GraphQL page.
 * PostGraphile does less per request than reftrail: no API key, no organization check on the reference, exact
 * (not case-insensitive) tag names. The bench checks that both answer the same ids for one reference and one pair.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadavg } from "node:os";
import { LoadGenerator, type LoadResult, type LoadSpec } from "./load.ts";
import {
  prepareDatabase,
  readSpecs,
  restTwoTagPath,
  sampleIds,
  tagPairs,
  type DataPathSettings,
} from "./data-path.bench.ts";
import { startReftrailChild, startServerChild, type ServerChild } from "./server-child.ts";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";
import { fmtInt, fmtMs, fmtRatio, loadNotes, machineLine, table } from "./report-format.ts";

export interface PeerSettings extends DataPathSettings {
  readonly rounds: number;
}

const PEER_DIR = join(import.meta.dirname, "postgraphile");

const PEER_REFERENCE = `query PeerReference($id: String!) {
  shippingReferenceById(id: $id) {
    referenceTagsByReferenceId { nodes { tagByTagId { id name } } }
    lifecycleEventsByReferenceId(first: 20, orderBy: [OCCURRED_AT_ASC, ID_ASC]) {
      edges { cursor node { id type occurredAt detail } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

const PEER_TWO_TAG_PAGE = `query PeerTwoTags($organizationId: String!, $names: [String!]!) {
  allShippingReferences(
    first: 50
    orderBy: [ID_DESC]
    filter: {
      organizationId: { equalTo: $organizationId }
      referenceTagsByReferenceId: { some: { tagByTagId: { name: { in: $names } } } }
    }
  ) {
    edges { cursor node { id containerId carrierCode referenceTagsByReferenceId { nodes { tagByTagId { id name } } } } }
    pageInfo { hasNextPage endCursor }
  }
}`;

const log = (message: string) => process.stderr.write(`[bench:peer] ${message}\n`);

/** `npm ci` in bench/postgraphile the first time (its lock file pins every version). */
function installPeer(): void {
  if (existsSync(join(PEER_DIR, "node_modules", "postgraphile", "package.json"))) return;
  log("installing PostGraphile 4.14.1 into bench/postgraphile (npm ci, first use only)");
  const result = spawnSync("npm", ["ci", "--prefix", PEER_DIR, "--no-audit", "--no-fund"], { stdio: "inherit" });
  if (result.status !== 0) throw new Error(`npm ci --prefix ${PEER_DIR} failed (${result.status})`);
}

async function graphql(url: string, query: string, variables: object): Promise<any> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ query, variables }),
  });
  const answer = (await response.json()) as { data?: any; errors?: unknown };
  if (!response.ok || answer.errors) throw new Error(`PostGraphile: ${response.status} ${JSON.stringify(answer)}`);
  return answer.data;
}

type Query = "reference" | "restPage" | "graphqlPage";
const QUERY_NAMES: Record<Query, string> = {
  reference: "reference + tags + first 20 events (GraphQL both)",
  restPage: "two-tag any page of 50: reftrail REST vs PostGraphile GraphQL",
  graphqlPage: "two-tag any page of 50: GraphQL both",
};

interface Round {
  readonly reftrail: Record<Query, LoadResult>;
  readonly peer: { reference: LoadResult; page: LoadResult };
}

export interface PeerReport {
  readonly references: number;
  readonly rounds: Round[];
  readonly medianRatio: Record<Query, number>;
  readonly peakRssMiB: { readonly reftrail: number; readonly postgraphile: number };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

export async function runPeerBench(settings: PeerSettings): Promise<PeerReport | null> {
  if (!settings.databases.includes("postgres")) {
    log("skipped: PostGraphile runs on PostgreSQL only (BENCH_DATABASES has no postgres)");
    return null;
  }
  installPeer();
  const loadAtStart = loadavg();
  const references = settings.scales[0]!;
  const { database, organizationId, apiKey, seeded } = await prepareDatabase("postgres", references, settings);
  const loads = new LoadGenerator();
  let reftrail: ServerChild | undefined;
  let peer: ServerChild | undefined;
  try {
    reftrail = await startReftrailChild(database.url, { WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY });
    peer = await startServerChild(join(PEER_DIR, "server.mjs"), [database.url], { execArgv: [], cwd: PEER_DIR });
    const ours = await readSpecs(reftrail.url, apiKey, seeded);
    const peerSpecs = await peerReadSpecs(peer.url, reftrail.url, apiKey, organizationId, seeded);
    const measure = (spec: Omit<LoadSpec, "connections">) =>
      loads.run({
        ...spec,
        connections: settings.connections,
        durationSeconds: settings.durationSeconds,
        warmupSeconds: settings.warmupSeconds,
      });
    reftrail.resetPeak();
    peer.resetPeak();
    const rounds: Round[] = [];
    for (let round = 1; round <= settings.rounds; round++) {
      // Each of PostGraphile's loads runs right after the reftrail load it is compared with, so that the two
      // sides of a ratio are minutes-close on a machine whose speed drifts.
      log(`round ${round}/${settings.rounds}: reference, reftrail then PostGraphile`);
      const reference = await measure(ours.reference);
      const peerReference = await measure(peerSpecs.reference);
      log(`round ${round}/${settings.rounds}: two-tag page, reftrail REST, PostGraphile, reftrail GraphQL`);
      const restPage = await measure(ours.restPage);
      const peerPage = await measure(peerSpecs.page);
      const graphqlPage = await measure(ours.graphqlPage);
      rounds.push({
        reftrail: { reference, restPage, graphqlPage },
        peer: { reference: peerReference, page: peerPage },
      });
    }
    const ratios = (query: Query) =>
      rounds.map((r) => r.reftrail[query].rps / (query === "reference" ? r.peer.reference : r.peer.page).rps);
    const report: PeerReport = {
      references,
      rounds,
      medianRatio: {
        reference: median(ratios("reference")),
        restPage: median(ratios("restPage")),
        graphqlPage: median(ratios("graphqlPage")),
      },
      peakRssMiB: { reftrail: reftrail.peakRssMiB(), postgraphile: peer.peakRssMiB() },
    };
    console.log(`\n${formatPeer(report, settings, loadAtStart)}\n`);
    return report;
  } finally {
    await reftrail?.stop();
    await peer?.stop();
    await loads.close();
    await database.drop();
  }
}

/** PostGraphile's two reads with random keys, after checking it answers what reftrail answers. */
async function peerReadSpecs(
  peerUrl: string,
  reftrailUrl: string,
  apiKey: string,
  organizationId: string,
  seeded: Awaited<ReturnType<typeof prepareDatabase>>["seeded"],
) {
  const ids = sampleIds(seeded.referenceIds);
  const pairs = tagPairs(seeded.tagNames);
  const [a, b] = pairs[0]!;
  const reference = await graphql(`${peerUrl}/graphql`, PEER_REFERENCE, { id: ids[0] });
  const eventIds = reference.shippingReferenceById.lifecycleEventsByReferenceId.edges.map(
    (edge: { node: { id: string } }) => edge.node.id,
  );
  const theirs = await fetch(`${reftrailUrl}/v1/references/${ids[0]}/events?limit=20`, {
    headers: { "X-API-Key": apiKey },
  }).then((response) => response.json() as Promise<{ data: { id: string }[] }>);
  if (JSON.stringify(eventIds) !== JSON.stringify(theirs.data.map((event) => event.id))) {
    throw new Error("PostGraphile and reftrail list different first 20 events for one reference");
  }
  const page = await graphql(`${peerUrl}/graphql`, PEER_TWO_TAG_PAGE, { organizationId, names: [a, b] });
  const rest = await fetch(`${reftrailUrl}${restTwoTagPath(a, b)}`, { headers: { "X-API-Key": apiKey } }).then(
    (response) => response.json() as Promise<{ data: { id: string }[] }>,
  );
  const pageIds = page.allShippingReferences.edges.map((edge: { node: { id: string } }) => edge.node.id);
  if (JSON.stringify(pageIds) !== JSON.stringify(rest.data.map((r) => r.id))) {
    throw new Error("PostGraphile and reftrail answer different two-tag pages for one pair");
  }
  const headers = { "Content-Type": "application/json", "Cache-Control": "no-cache" };
  return {
    reference: {
      url: `${peerUrl}/graphql`,
      method: "POST",
      headers,
      variants: ids.map((id) => ({
        path: "/graphql",
        body: JSON.stringify({ query: PEER_REFERENCE, variables: { id } }),
      })),
    } satisfies Omit<LoadSpec, "connections">,
    page: {
      url: `${peerUrl}/graphql`,
      method: "POST",
      headers,
      variants: pairs.map((names) => ({
        path: "/graphql",
        body: JSON.stringify({ query: PEER_TWO_TAG_PAGE, variables: { organizationId, names } }),
      })),
    } satisfies Omit<LoadSpec, "connections">,
  };
}

function formatPeer(report: PeerReport, settings: PeerSettings, loadAtStart: readonly number[]): string {
  const rows: string[][] = [];
  for (const query of ["reference", "restPage", "graphqlPage"] as const) {
    report.rounds.forEach((round, index) => {
      const ours = round.reftrail[query];
      const theirs = query === "reference" ? round.peer.reference : round.peer.page;
      rows.push([
        QUERY_NAMES[query],
        String(index + 1),
        fmtInt(ours.rps),
        `${fmtMs(ours.p50)} / ${fmtMs(ours.p99)}`,
        fmtInt(theirs.rps),
        `${fmtMs(theirs.p50)} / ${fmtMs(theirs.p99)}`,
        fmtRatio(ours.rps / theirs.rps),
        [loadNotes(ours), loadNotes(theirs)].filter(Boolean).join("; "),
      ]);
    });
    rows.push([QUERY_NAMES[query], "median", "", "", "", "", `**${fmtRatio(report.medianRatio[query])}**`, ""]);
  }
  return [
    `Peer: reftrail vs PostGraphile 4.14.1 on the same PostgreSQL data (${fmtInt(report.references)} references, ` +
      `2 of ${settings.tags} tags and ${settings.eventsPerReference} events each), random keys, ` +
      `${settings.connections} connections, ${settings.durationSeconds} s after ${settings.warmupSeconds} s warm-up, ` +
      `alternating rounds (each PostGraphile load next to the reftrail load it is compared with); ratio = reftrail req/s ÷ PostGraphile req/s`,
    machineLine(loadAtStart),
    "",
    table(
      ["query", "round", "reftrail req/s", "p50 / p99", "PostGraphile req/s", "p50 / p99", "ratio", "notes"],
      rows,
      [false, true, true, true, true, true, true, false],
    ),
    "",
    `server peak RSS over the part: reftrail ${fmtInt(report.peakRssMiB.reftrail)} MiB, PostGraphile ` +
      `${fmtInt(report.peakRssMiB.postgraphile)} MiB`,
  ].join("\n");
}
