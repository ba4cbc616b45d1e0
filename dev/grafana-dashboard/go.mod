module cpushield.invalid/dev/grafana-dashboard

go 1.26.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
