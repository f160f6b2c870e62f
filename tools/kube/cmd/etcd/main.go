// Command etcd is the etcd server at the version the pinned Kubernetes release's client
// expects (Debian's etcd 3.4 is below Kubernetes' minimum).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
