module github.com/coxswain/coxswain/e2e/argocd

go 1.26.0

require github.com/yuin/gopher-lua v1.1.1
