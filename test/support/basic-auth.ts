/** The Authorization header of HTTP Basic for a merchant id and key, UTF-8 encoded (docs/protocol.md#users). */
export function basic(id: string, key: string): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${id}:${key}`, 'utf8').toString('base64')}` };
}
