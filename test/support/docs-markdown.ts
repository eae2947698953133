/**
 * Reading the documentation as data: its pages, fenced code blocks, headings
 * (as GitHub turns them into anchors) and relative links, for the tests that
 * keep README.md and docs/ true (test/package/docs.test.ts, test/package/examples.test.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { ROOT } from './processes.js';

/** README.md and every page in docs/, as paths relative to the repository. */
export function docPages(): string[] {
  return ['README.md', ...docsDirectory().map((name) => `docs/${name}`)];
}

/** The pages in docs/ (Markdown), sorted. */
export function docsDirectory(): string[] {
  // The pages: docs/ also holds the images they show (api-reference.png).
  return readdirSync(`${ROOT}docs`).filter((name) => name.endsWith('.md')).sort();
}

export function readPage(page: string): string {
  return readFileSync(`${ROOT}${page}`, 'utf8');
}

export interface CodeBlock {
  page: string;
  /** The fence's language, e.g. `ts`; '' for none. */
  lang: string;
  /** Words after the language on the fence line, e.g. `['ignore']`. */
  flags: string[];
  /** Line number (1-based) of the block's first content line in its page. */
  line: number;
  /** The content, with the fence's indentation removed. */
  text: string;
  /** The `<!-- name -->` comment right above the fence, if any. */
  marker?: string;
}

/** Every fenced (```) code block of a page, in order. */
export function codeBlocks(page: string, markdown = readPage(page)): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\S*)(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]!); j++) body.push(lines[j]!.slice(Math.min(indent, /^\s*/.exec(lines[j]!)![0].length)));
    const previous = lines.slice(0, i).reverse().find((line) => line.trim() !== '');
    const marker = previous === undefined ? undefined : /^\s*<!--\s*(.+?)\s*-->\s*$/.exec(previous)?.[1];
    blocks.push({ page, lang: open[2]!, flags: open[3]!.trim().split(/\s+/).filter(Boolean), line: i + 2, text: body.join('\n'), ...(marker === undefined ? {} : { marker }) });
    i = j;
  }
  return blocks;
}

/** The page without its fenced code blocks and inline code, for finding prose links. */
function prose(markdown: string): string {
  const lines = markdown.split('\n');
  let inFence = false;
  return lines
    .map((line) => {
      if (/^\s*```/.test(line)) {
        inFence = !inFence;
        return '';
      }
      return inFence ? '' : line.replace(/`[^`]*`/g, '');
    })
    .join('\n');
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
export function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor of a page: its headings' slugs, repeated ones numbered as GitHub does. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  let inFence = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) inFence = !inFence;
    const heading = inFence ? null : /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/** The `##` headings of a page, as written. */
export function sectionHeadings(markdown: string): string[] {
  let inFence = false;
  const headings: string[] = [];
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) inFence = !inFence;
    const match = inFence ? null : /^##\s+(.+?)\s*$/.exec(line);
    if (match) headings.push(match[1]!);
  }
  return headings;
}

export interface Link {
  page: string;
  target: string;
}

/** Every Markdown link of a page outside code, as written (`docs/mysql.md#deploy`, `https://…`). */
export function links(page: string, markdown = readPage(page)): Link[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => ({ page, target: match[1]! }));
}

/** The rows of the first Markdown table after `heading` (a line of the page), as arrays of cells. */
export function tableAfter(markdown: string, heading: string): string[][] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line.trim() === heading);
  if (start === -1) throw new Error(`No line "${heading}"`);
  const rows: string[][] = [];
  let i = start + 1;
  while (i < lines.length && !lines[i]!.startsWith('|')) i++;
  for (; i < lines.length && lines[i]!.startsWith('|'); i++) {
    if (/^\|[\s|:-]+\|$/.test(lines[i]!)) continue;
    rows.push(splitRow(lines[i]!));
  }
  return rows.slice(1);
}

/** Splits a table row on the `|` that are not escaped and not inside backticks. */
function splitRow(row: string): string[] {
  const cells: string[] = [];
  let cell = '';
  let inCode = false;
  for (let i = 1; i < row.length; i++) {
    const char = row[i]!;
    if (char === '`') inCode = !inCode;
    if (char === '\\' && row[i + 1] === '|') {
      cell += '|';
      i++;
    } else if (char === '|' && !inCode) {
      cells.push(cell.trim());
      cell = '';
    } else {
      cell += char;
    }
  }
  return cells;
}
