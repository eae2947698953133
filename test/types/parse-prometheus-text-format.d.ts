/** The one function of parse-prometheus-text-format, which ships no types. */
declare module 'parse-prometheus-text-format' {
  interface Sample {
    value?: string;
    count?: string;
    sum?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
  }
  interface Family {
    name: string;
    help: string;
    type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    metrics: Sample[];
  }
  export default function parsePrometheusTextFormat(text: string): Family[];
}
