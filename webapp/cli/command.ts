// What the Node tools do alike: a usage error exits 2 with the usage line, a failure exits 1
// with its message, and numeric options are checked before use.

export interface Command {
  /** A usage error: says what is wrong, then the usage line, and exits 2. */
  fail(message: string): never;
  /** A non-negative option, `fallback` when absent; an integer unless `real`. */
  number(name: string, value: string | undefined, fallback: number, real?: boolean): number;
  /** Runs `main`, exiting 0 when it resolves and 1 with its message when it rejects. */
  run(main: () => Promise<void>): void;
}

export function command(name: string, usage: string): Command {
  const fail = (message: string): never => {
    console.error(`${name}: ${message}\n${usage}`);
    process.exit(2);
  };
  return {
    fail,
    number(option, value, fallback, real = false) {
      if (value === undefined) return fallback;
      const n = Number(value);
      if (!(n >= 0) || (!real && !Number.isInteger(n))) fail(`--${option} must be a non-negative ${real ? "number" : "integer"}, got ${JSON.stringify(value)}`);
      return n;
    },
    run(main) {
      main().then(
        () => process.exit(0),
        (e) => {
          console.error(`${name}: ${(e as Error).message}`);
          process.exit(1);
        },
      );
    },
  };
}
