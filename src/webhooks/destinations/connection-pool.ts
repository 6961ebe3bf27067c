/*
 * Broker connections, one per destination URL, shared by every endpoint and delivery to that URL. Bounded: past
 * `max` connections the one unused longest is closed to make room (it is opened again when needed). A connection
 * unused for `idleMs` is closed; so is every one at shutdown. A connection that fails is dropped from the pool at
 * once (`discard`), so that the next delivery opens a fresh one instead of waiting on a dead socket.
 */

export interface PoolOptions<C> {
  readonly open: (url: string) => Promise<C>;
  readonly close: (connection: C) => Promise<void>;
  /** Whether an opened connection still works (the broker may have closed it meanwhile). */
  readonly alive: (connection: C) => boolean;
  readonly max: number;
  readonly idleMs: number;
}

interface Entry<C> {
  readonly connection: Promise<C>;
  /** The connection once opened. */
  opened?: C;
  lastUsed: number;
  /** Sends using it now: an entry in use is never closed for room or idleness. */
  users: number;
}

export class ConnectionPool<C> {
  private readonly entries = new Map<string, Entry<C>>();
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: PoolOptions<C>) {
    this.sweeper = setInterval(() => this.closeIdle(), Math.max(1_000, options.idleMs / 2));
    this.sweeper.unref();
  }

  /** Runs `work` on the URL's connection (opened on first use); the connection stays pooled afterwards. */
  async use<T>(url: string, work: (connection: C) => Promise<T>): Promise<T> {
    if (this.closed) throw new Error("the connection pool is closed");
    let entry = this.entries.get(url);
    // A connection the broker closed since its last use is replaced before a delivery is given to it.
    if (entry?.opened !== undefined && !this.options.alive(entry.opened)) {
      this.entries.delete(url);
      void this.closeEntry(entry);
      entry = undefined;
    }
    if (!entry) {
      this.makeRoom();
      const connection = this.options.open(url);
      const created: Entry<C> = { connection, lastUsed: Date.now(), users: 0 };
      entry = created;
      this.entries.set(url, created);
      connection.then(
        (opened) => (created.opened = opened),
        // A failed open leaves no entry behind: the next delivery tries again.
        () => this.forget(url, created),
      );
    }
    entry.users++;
    entry.lastUsed = Date.now();
    try {
      return await work(await entry.connection);
    } finally {
      entry.users--;
      entry.lastUsed = Date.now();
    }
  }

  /** Drops the URL's connection if it is still `connection` (it failed: the next use opens another). */
  discard(url: string, connection: C): void {
    const entry = this.entries.get(url);
    if (!entry) return;
    void entry.connection.then((current) => {
      if (current !== connection || this.entries.get(url) !== entry) return;
      this.entries.delete(url);
      this.options.close(connection).catch(() => undefined);
    });
  }

  get size(): number {
    return this.entries.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(all.map((entry) => this.closeEntry(entry)));
  }

  private forget(url: string, entry: Entry<C>): void {
    if (this.entries.get(url) === entry) this.entries.delete(url);
  }

  private makeRoom(): void {
    while (this.entries.size >= this.options.max) {
      let oldest: [string, Entry<C>] | null = null;
      for (const item of this.entries)
        if (item[1].users === 0 && (!oldest || item[1].lastUsed < oldest[1].lastUsed)) oldest = item;
      // Every connection is in use: the pool grows past its bound for a moment rather than make a delivery wait.
      if (!oldest) return;
      this.entries.delete(oldest[0]);
      void this.closeEntry(oldest[1]);
    }
  }

  private closeIdle(): void {
    const before = Date.now() - this.options.idleMs;
    for (const [url, entry] of this.entries) {
      if (entry.users > 0 || entry.lastUsed > before) continue;
      this.entries.delete(url);
      void this.closeEntry(entry);
    }
  }

  private async closeEntry(entry: Entry<C>): Promise<void> {
    try {
      await this.options.close(await entry.connection);
    } catch {
      // Failed to open, or already closed by the broker: nothing left to close.
    }
  }
}
