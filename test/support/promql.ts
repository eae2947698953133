/**
 * Just enough of PromQL and of the Prometheus text format to check the
 * monitoring examples (examples/monitoring/) against a real scrape: which
 * metrics and labels an expression uses, and which the server exports.
 * Not a PromQL parser: it reads the expressions we write (selectors, `by`
 * clauses, functions, ranges), and the suite checks it finds every rule.
 */

/** A metric an expression selects, with its label matchers (`=`, `!=`, `=~`, `!~`). */
export interface Selector {
  metric: string;
  matchers: { label: string; op: string; value: string }[];
}

export interface ExpressionUse {
  selectors: Selector[];
  /** Labels of `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`. */
  grouping: string[];
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan']);
const GROUPING = /\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g;

/** The metrics, matchers and grouping labels of one expression. Grafana's `$__rate_interval` and other variables count as a range. */
export function readExpression(expression: string): ExpressionUse {
  let rest = expression.replace(/\$\{?\w+\}?/g, '5m');
  const grouping: string[] = [];
  rest = rest.replace(GROUPING, (_all, labels: string) => {
    grouping.push(...labels.split(',').map((label) => label.trim()).filter(Boolean));
    return ' ';
  });
  const selectors: Selector[] = [];
  // A selector with matchers; its braces are taken out, so that what is left holds names only.
  rest = rest.replace(/([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}/g, (_all, metric: string | undefined, body: string) => {
    const matchers = [...body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)].map(([, label, op, value]) => ({ label: label!, op: op!, value: JSON.parse(`"${value}"`) as string }));
    if (metric === undefined) throw new Error(`a selector without a metric name in ${expression}`);
    selectors.push({ metric, matchers });
    return ' ';
  });
  rest = rest.replace(/"(?:[^"\\]|\\.)*"/g, ' ').replace(/\[[^\]]*\]/g, ' ');
  for (const match of rest.matchAll(/(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = match;
    if (call !== undefined || KEYWORDS.has(name!.toLowerCase())) continue;
    selectors.push({ metric: name!, matchers: [] });
  }
  return { selectors, grouping };
}

/**
 * Every `expr:` of a Prometheus rules file, as we write them: on the same line, or a
 * block (`|` or `>`) of the lines indented deeper. The suite compares the count with
 * promtool's, so a form this misses cannot go unnoticed.
 */
export function ruleExpressions(yaml: string): string[] {
  const lines = yaml.split('\n');
  const found: string[] = [];
  lines.forEach((line, at) => {
    const match = /^(\s*)(?:- )?expr:\s*(.*)$/.exec(line);
    if (!match) return;
    const [, indent, value] = match;
    if (!/^[|>][-+]?$/.test(value!.trim())) {
      found.push(value!.trim().replace(/^'(.*)'$|^"(.*)"$/, '$1$2'));
      return;
    }
    const block: string[] = [];
    for (const next of lines.slice(at + 1)) {
      if (next.trim() !== '' && next.search(/\S/) <= indent!.length) break;
      block.push(next.trim());
    }
    found.push(block.join(' ').trim());
  });
  return found;
}

/** A metric family of a scrape: its type, and the label sets of its samples (histogram `le` included). */
export interface Family {
  type: string;
  samples: { name: string; labels: Record<string, string> }[];
}

/** Reads the text exposition format: `# TYPE` lines and samples, by family. */
export function readScrape(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const familyOf = (sample: string) => {
    for (const suffix of ['_bucket', '_sum', '_count', '']) {
      if (!sample.endsWith(suffix)) continue;
      const family = families.get(sample.slice(0, sample.length - suffix.length));
      if (family) return family;
    }
    return undefined;
  };
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) families.set(type[1]!, { type: type[2]!, samples: [] });
    if (line === '' || line.startsWith('#')) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+/.exec(line);
    if (!sample) throw new Error(`not a sample line: ${line}`);
    const labels = Object.fromEntries([...(sample[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map(([, name, value]) => [name!, value!]));
    familyOf(sample[1]!)?.samples.push({ name: sample[1]!, labels });
  }
  return families;
}

/** What each metric type exposes: a counter and a gauge their name, a histogram `_bucket`, `_sum`, `_count`. */
const SERIES: Record<string, string[]> = { counter: [''], gauge: [''], histogram: ['_bucket', '_sum', '_count'], summary: ['', '_sum', '_count'], untyped: [''] };

/**
 * What an expression uses that the scrape does not have: a metric name (series of a
 * histogram by their suffix), a label of a matcher or a grouping clause that none of
 * the expression's metrics carries, or a `=`/`=~` matcher that no sample matches.
 */
/** Labels Prometheus attaches to every series of a target when it scrapes: not in the server's own text. */
const TARGET_LABELS = new Set(['job', 'instance']);

export function missingFromScrape(expression: string, scrape: Map<string, Family>): string[] {
  const { selectors, grouping } = readExpression(expression);
  const problems: string[] = [];
  const used: Family[] = [];
  for (const { metric, matchers: all } of selectors) {
    // Prometheus's own: `up` per target, and the target labels it attaches to every scraped series.
    if (metric === 'up') continue;
    const matchers = all.filter(({ label }) => !TARGET_LABELS.has(label));
    const entry = [...scrape].find(([family, { type }]) => (SERIES[type] ?? ['']).some((suffix) => `${family}${suffix}` === metric));
    if (!entry) {
      problems.push(`no metric ${metric} in the scrape`);
      continue;
    }
    const family = entry[1];
    used.push(family);
    const samples = family.samples.filter((sample) => sample.name === metric);
    for (const { label, op, value } of matchers) {
      if (!samples.some((sample) => label in sample.labels)) problems.push(`${metric} has no label ${label}`);
      else if (op === '=' || op === '=~') {
        const accepts = op === '=' ? (v: string) => v === value : (v: string) => new RegExp(`^(?:${value})$`).test(v);
        if (!samples.some((sample) => accepts(sample.labels[label] ?? ''))) problems.push(`no ${metric} sample with ${label}${op}"${value}"`);
      }
    }
  }
  if (selectors.length === 0) problems.push(`no metric in ${expression}`);
  for (const label of grouping) {
    if (!used.some((family) => family.samples.some((sample) => label in sample.labels))) problems.push(`no metric of "${expression}" has the label ${label}`);
  }
  return problems;
}
