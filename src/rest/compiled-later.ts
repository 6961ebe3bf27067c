/*
 * Compilations put off past the server's start: each runs on its first use, or in the background once the server
 * listens, whichever comes first.
 *
 * The /v1 routes' validators (ajv) and response serializers (fast-json-stringify) are code generated from JSON
 * Schemas. Compiled at start, they were a fifth of a start's CPU. Compiled on a route's first request only, they
 * cost that request, and every request waiting behind it on the event loop, the whole compilation: measured under
 * a read load on 2 cores, the first extraction POST held the loop for 90 ms (its Reference serializer and its
 * validators), and a write feed that started with the load saw its writes queue behind it (docs/decisions.md,
 * "…and compiles the rest once it listens").
 * So the rest are compiled once the server listens, one per event-loop turn: the start stays short, no single turn
 * holds more than one compilation, and by the time traffic reaches a route its code is usually there.
 */
export class CompiledLater {
  private readonly pending = new Set<() => unknown>();
  private backgroundStarted = false;
  private stopped = false;

  /** `compile`, run at most once: on the returned function's first call, or by `compileInBackground`. */
  add<T>(compile: () => T): () => T {
    let compiled: { value: T } | undefined;
    const get = (): T => {
      if (!compiled) {
        compiled = { value: compile() };
        this.pending.delete(get);
      }
      return compiled.value;
    };
    this.pending.add(get);
    return get;
  }

  /** Compilations not yet run. */
  get remaining(): number {
    return this.pending.size;
  }

  /**
   * Compiles what is still pending, one per turn (setImmediate: after the turn's I/O, so requests keep flowing
   * between compilations). Resolves when none is left, or once `stop` was called; a second call resolves at once.
   */
  compileInBackground(): Promise<void> {
    if (this.backgroundStarted) return Promise.resolve();
    this.backgroundStarted = true;
    return new Promise((resolve) => {
      const next = () => {
        const [first] = this.pending;
        if (!first || this.stopped) return resolve();
        try {
          first();
        } catch {
          // Left for its first use to fail again, inside a request whose error handling logs and answers it.
          this.pending.delete(first);
        }
        setImmediate(next);
      };
      setImmediate(next);
    });
  }

  /** Ends the background compilation after the current one (the server is closing: what is left is not needed). */
  stop(): void {
    this.stopped = true;
  }
}
