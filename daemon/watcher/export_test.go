package watcher

// The builders and waits of helpers_test.go and kubernetes_test.go, for
// the tests of package watcher_test that go through watcher/clientset
// (which imports this package, so they cannot be in it).
var (
	TestService       = service
	TestEndpointSlice = endpointSlice
	TestWithEndpoints = withEndpoints
	TestAPIEndpoint   = apiEndpoint
	TestServicePort   = servicePort
	TestModelEndpoint = modelEndpoint
	TestAddrs         = addrs
	TestCmpOpts       = cmpOpts
	TestPoll          = poll
	TestWaitFor       = waitFor
)
