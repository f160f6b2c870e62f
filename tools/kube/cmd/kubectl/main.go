// Command kubectl is the kubectl of the release go.mod pins, built from its module:
// the tests check kubemill's printer columns, explain, scale and auth can-i with it.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Verbosity is read before the command is built, as upstream's main does, so that
	// building it (kuberc, plugins) logs at the level asked for.
	_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
