/** A usage or configuration problem: printed as one line, exit code 2. */
export class CliUsageError extends Error {
  override name = 'CliUsageError';
}
