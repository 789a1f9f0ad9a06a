module holon.dev/holon

go 1.26.8

require (
	github.com/julienschmidt/httprouter v1.3.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/wasilibs/go-re2 v1.13.0
	go.etcd.io/bbolt v1.5.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
