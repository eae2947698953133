/**
 * Digests are compared only in constant time (docs/testing.md#rules-the-suites-keep): every
 * comparison of an HMAC, a digest or a signature goes through the helpers of
 * src/signing/crypto.ts (`constantTimeHexEqual`, `constantTimeDigestEqual`), never `===`, `!==`,
 * `Buffer.equals`, `Buffer.compare` or `localeCompare`, whose time tells how many leading bytes an
 * attacker guessed right. The TypeScript compiler reads src/ and adapters/: an operand is a digest
 * when its name says so (`hmac`, `digest`, `signature`, `mac`, `expected`, ...), when it
 * is made by a digest function (`hmacSha224Hex(...)`, `createHmac(...).digest()`, `sign(...)`), or
 * when it is a variable given such a value, or a copy of one (lower-cased, sliced,
 * `Buffer.from`). A comparison
 * with a literal (`signature === undefined`) or of a `.length` is no comparison of digests.
 * `timingSafeEqual` itself appears only in the helpers' module and in the files listed below.
 *
 * A control set of snippets, each breaking the rule once beside code it allows, must be reported
 * exactly: so the rule cannot quietly stop matching.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

/** The constant-time helpers' module: the one place that compares digests with node:crypto. */
const HELPERS = 'src/signing/crypto.ts';
/** Files that call `timingSafeEqual` themselves, and why. */
const TIMING_SAFE_ELSEWHERE: Record<string, string> = {
  // The merchant client's webhook check: node:crypto's constant-time comparison, after the same length check as the helper's.
  'src/client/verify-webhook.ts': 'timingSafeEqual with a length check, as constantTimeDigestEqual',
};

/** Names of values that hold a digest, a MAC or a signature. */
const DIGEST_NAME = /hmac|digest|signature|^mac$|mac$|^expected|^sig$/i;
/** Functions whose result is a digest. */
const DIGEST_MAKERS = new Set(['hmacSha224Hex', 'sha256', 'createHmac', 'createHash', 'sign', 'digest', 'keyDigest', 'subtleDigest']);
/** Methods that give a copy of a string or buffer: a copy of a digest is a digest. */
const COPIES = new Set(['toLowerCase', 'toUpperCase', 'toString', 'trim', 'slice', 'subarray', 'normalize', 'toLocaleLowerCase']);
/** Functions that give a copy of their first argument in another form (`Buffer.from(hmac, 'hex')`). */
const CONVERSIONS = new Set(['from', 'encode', 'String']);
/** Comparisons that stop at the first byte that differs. */
const EQUALITY = new Set([ts.SyntaxKind.EqualsEqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsEqualsToken, ts.SyntaxKind.EqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsToken]);
const COMPARING_METHODS = new Set(['equals', 'compare', 'localeCompare']);

function unwrap(node: ts.Expression): ts.Expression {
  let current = node;
  while (ts.isParenthesizedExpression(current) || ts.isNonNullExpression(current) || ts.isAsExpression(current) || ts.isTypeAssertionExpression(current)) current = current.expression;
  return current;
}

function isLiteral(node: ts.Expression): boolean {
  const e = unwrap(node);
  return (
    ts.isStringLiteral(e) ||
    ts.isNoSubstitutionTemplateLiteral(e) ||
    ts.isNumericLiteral(e) ||
    ts.isBigIntLiteral(e) ||
    ts.isTypeOfExpression(e) ||
    e.kind === ts.SyntaxKind.NullKeyword ||
    e.kind === ts.SyntaxKind.TrueKeyword ||
    e.kind === ts.SyntaxKind.FalseKeyword ||
    (ts.isIdentifier(e) && e.text === 'undefined') ||
    (ts.isPrefixUnaryExpression(e) && ts.isNumericLiteral(e.operand))
  );
}

/** The name a call is made by: `f(...)` → f, `a.b.f(...)` → f. */
function calleeName(call: ts.CallExpression): string | undefined {
  const callee = unwrap(call.expression);
  if (ts.isIdentifier(callee)) return callee.text;
  if (ts.isPropertyAccessExpression(callee)) return callee.name.text;
  return undefined;
}

/** The violations of one file's text, as `path:line: what`. */
export function digestComparisonViolations(path: string, text: string): string[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.ES2022, true);
  const violations: string[] = [];
  // Variables given a digest's value, found in a first pass (by name, for the whole file).
  const tainted = new Set<string>();

  function isDigest(node: ts.Expression): boolean {
    const e = unwrap(node);
    if (ts.isIdentifier(e)) return DIGEST_NAME.test(e.text) || tainted.has(e.text);
    if (ts.isPropertyAccessExpression(e)) return e.name.text !== 'length' && DIGEST_NAME.test(e.name.text);
    if (ts.isElementAccessExpression(e)) return isDigest(e.expression);
    if (ts.isCallExpression(e)) {
      const name = calleeName(e);
      if (name === undefined) return false;
      if (DIGEST_MAKERS.has(name) || DIGEST_NAME.test(name)) return true;
      if (CONVERSIONS.has(name) && e.arguments[0] !== undefined && isDigest(e.arguments[0])) return true;
      const callee = unwrap(e.expression);
      return COPIES.has(name) && ts.isPropertyAccessExpression(callee) && isDigest(callee.expression);
    }
    if (ts.isBinaryExpression(e) && (e.operatorToken.kind === ts.SyntaxKind.QuestionQuestionToken || e.operatorToken.kind === ts.SyntaxKind.BarBarToken)) return isDigest(e.left) || isDigest(e.right);
    if (ts.isConditionalExpression(e)) return isDigest(e.whenTrue) || isDigest(e.whenFalse);
    return false;
  }

  const where = (node: ts.Node) => `${path}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`;

  // Taint until nothing changes: `const a = hmacSha224Hex(...)`, `const b = a.toLowerCase()`.
  for (let changed = true; changed; ) {
    changed = false;
    const visit = (node: ts.Node): void => {
      if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer && !tainted.has(node.name.text) && isDigest(node.initializer)) {
        tainted.add(node.name.text);
        changed = true;
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }

  const visit = (node: ts.Node): void => {
    if (ts.isBinaryExpression(node) && EQUALITY.has(node.operatorToken.kind) && !isLiteral(node.left) && !isLiteral(node.right) && (isDigest(node.left) || isDigest(node.right))) {
      violations.push(`${where(node)}: ${node.getText(source)}`);
    }
    if (ts.isCallExpression(node)) {
      const name = calleeName(node);
      const callee = unwrap(node.expression);
      if (name !== undefined && COMPARING_METHODS.has(name)) {
        const receiver = ts.isPropertyAccessExpression(callee) && !(ts.isIdentifier(callee.expression) && callee.expression.text === 'Buffer') ? [callee.expression] : [];
        if ([...receiver, ...node.arguments].some((operand) => isDigest(operand))) violations.push(`${where(node)}: ${node.getText(source)}`);
      }
      if (name === 'timingSafeEqual' && path !== HELPERS && !(path in TIMING_SAFE_ELSEWHERE)) violations.push(`${where(node)}: ${node.getText(source)} (use the helpers of ${HELPERS})`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return violations;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

describe('digests are compared only in constant time', () => {
  it('src/ and adapters/ compare no HMAC, digest or signature with ===, !==, equals, compare or localeCompare', () => {
    const files = [...sourceFiles('src'), ...sourceFiles('adapters')];
    expect(files.length).toBeGreaterThan(100);
    const violations = files.flatMap((file) => digestComparisonViolations(relative(ROOT, join(ROOT, file)), readFileSync(join(ROOT, file), 'utf8')));
    expect(violations, `compare digests with constantTimeHexEqual or constantTimeDigestEqual (${HELPERS}):\n${violations.join('\n')}\n`).toEqual([]);
  });

  it('the helpers compare in constant time, and the files allowed timingSafeEqual still use it', () => {
    for (const file of [HELPERS, ...Object.keys(TIMING_SAFE_ELSEWHERE)]) expect(readFileSync(join(ROOT, file), 'utf8'), file).toMatch(/timingSafeEqual\(/);
  });

  it('reports each comparison of a control set exactly, and nothing it allows', () => {
    const control = `
      import { createHmac, timingSafeEqual } from 'node:crypto';
      declare const secret: string, message: string, given: string, request: { hmac: string }, a: Buffer, b: Buffer, keys: string[];
      export function checks() {
        const expected = createHmac('sha224', secret).update(message).digest('hex');
        const made = hmacSha224Hex(secret, message);
        const lowered = made.toLowerCase();
        if (request.hmac === expected) return 1;
        if (given !== made) return 2;
        if (lowered == given) return 3;
        if (Buffer.from(given).equals(createHmac('sha224', secret).digest())) return 4;
        if (Buffer.compare(a, Buffer.from(expected)) === 0) return 5;
        if (given.localeCompare(lowered) === 0) return 6;
        if (timingSafeEqual(a, b)) return 7;
        if (sign(secret, message) === given) return 8;
        // Allowed: a literal, a length, the helpers, and values that are no digest.
        if (request.hmac === undefined || expected === '' || made.length !== given.length) return 0;
        if (constantTimeHexEqual(made, given) || constantTimeDigestEqual(a, b)) return 0;
        if (keys[0] === given || message === secret) return 0;
        return 9;
      }
      declare function hmacSha224Hex(key: string, message: string): string;
      declare function sign(key: string, message: string): string;
      declare function constantTimeHexEqual(a: string, b: string): boolean;
      declare function constantTimeDigestEqual(a: Buffer, b: Buffer): boolean;
    `;
    const lines = digestComparisonViolations('src/control.ts', control).map((v) => v.replace(/^src\/control\.ts:\d+: /, ''));
    expect(lines).toEqual([
      'request.hmac === expected',
      'given !== made',
      'lowered == given',
      "Buffer.from(given).equals(createHmac('sha224', secret).digest())",
      'Buffer.compare(a, Buffer.from(expected))',
      'given.localeCompare(lowered)',
      `timingSafeEqual(a, b) (use the helpers of ${HELPERS})`,
      'sign(secret, message) === given',
    ]);
  });
});
