// Command kube-scheduler is Kubernetes' the scheduler of the release go.mod pins,
// built from its module so that kubemill's tests run against the real thing.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones, as the upstream binary embeds them

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the build-info metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
