/**
 * Where an import's time goes, for `bench:mysql` and `bench:webhooks`: a Kysely plugin that sums the
 * wall time of every statement by kind (the time from sending it to its answer, on the import's
 * connection), and the Node process's own CPU time over the same span. What is left of the wall time
 * is the transactions' BEGIN and COMMIT (outside the plugin's reach) and the waits between statements.
 */
import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely';

export class StatementTimes implements KyselyPlugin {
  readonly totals = new Map<string, { count: number; ms: number }>();
  readonly #started = new WeakMap<object, { label: string; at: number }>();
  #cpu = process.cpuUsage();
  #wall = performance.now();

  /** Starts the span: clears the sums. */
  start(): void {
    this.totals.clear();
    this.#cpu = process.cpuUsage();
    this.#wall = performance.now();
  }

  transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
    this.#started.set(queryId as object, { label: labelOf(node), at: performance.now() });
    return node;
  }

  async transformResult({ result, queryId }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    const started = this.#started.get(queryId as object);
    if (started) {
      const entry = this.totals.get(started.label) ?? { count: 0, ms: 0 };
      entry.count++;
      entry.ms += performance.now() - started.at;
      this.totals.set(started.label, entry);
    }
    return result;
  }

  /** A markdown table of the span: each kind's statements, seconds and share of the wall time. */
  table(title: string): string {
    const wall = performance.now() - this.#wall;
    const cpu = process.cpuUsage(this.#cpu);
    const rows = [...this.totals].sort(([, a], [, b]) => b.ms - a.ms);
    const inStatements = rows.reduce((sum, [, entry]) => sum + entry.ms, 0);
    const lines = [`| ${title} | statements | seconds | share of the wall time |`, '|---|--:|--:|--:|'];
    for (const [label, entry] of rows) lines.push(`| ${label} | ${entry.count} | ${(entry.ms / 1000).toFixed(2)} | ${((100 * entry.ms) / wall).toFixed(1)}% |`);
    lines.push(`| outside statements (BEGIN/COMMIT, waits) |  | ${((wall - inStatements) / 1000).toFixed(2)} | ${((100 * (wall - inStatements)) / wall).toFixed(1)}% |`);
    lines.push(`| (Node CPU, user+system, overlapping the above) |  | ${((cpu.user + cpu.system) / 1e6).toFixed(2)} | ${((100 * (cpu.user + cpu.system)) / 1000 / wall).toFixed(1)}% |`);
    return lines.join('\n');
  }
}

/** A short name for a statement: the start of a raw one (a LOAD DATA by its table), else its kind and table. */
function labelOf(node: RootOperationNode): string {
  if (node.kind === 'RawNode') {
    const text = node.sqlFragments.join('?').replace(/\s+/g, ' ').trim();
    const load = /^(?:SET STATEMENT (.+?) FOR )?LOAD DATA LOCAL INFILE '[^']*' INTO TABLE (\w+)/.exec(text);
    if (load) return `LOAD DATA ${load[2]}${load[1] ? ` (${load[1]})` : ''}`;
    return text.length > 70 ? `${text.slice(0, 70)}…` : text;
  }
  const table = /"kind":"TableNode".*?"name":"(\w+)"/.exec(JSON.stringify(node))?.[1] ?? '?';
  return `${node.kind.replace(/QueryNode$/, '')} ${table}`;
}
