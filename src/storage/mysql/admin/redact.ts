/** Quoted values out of validation messages, without Kysely: the command line loads it for commands that need no peer. */

/**
 * What precedes a quoted merchant id in a seed's problems (`merchants[1].id: "x" appears twice`,
 * `appears twice for merchant "x"`): an operator needs it to find the line, and it is no personal data.
 */
const MERCHANT_ID_BEFORE = /(?:merchant |merchants\[\d+\]\.id: )$/;

/** Replaces quoted values in a validation message (they may be personal data), but not a merchant id. */
export function redact(message: string): string {
  return message.replace(/"(?:[^"\\]|\\.)*"/g, (quoted, offset: number) => (MERCHANT_ID_BEFORE.test(message.slice(0, offset)) ? quoted : 'the value'));
}
