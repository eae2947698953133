/** Quoted values out of validation messages, without Kysely: the command line loads it for commands that need no peer. */

/** Replaces quoted values in a validation message (they may be personal data). */
export function redact(message: string): string {
  return message.replace(/"(?:[^"\\]|\\.)*"/g, 'the value');
}
