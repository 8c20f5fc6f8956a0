package main

// A stand-in for a storage provisioner: every PersistentVolumeClaim gets a PersistentVolume
// of its size, pre-bound to it, which the real PV controller then binds. Deleting the claim
// deletes its volume. Nothing is stored: pods on fake nodes never touch the files.

import (
	"context"
	"log"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

const labelClaimUID = "kubesim.io/claim-uid"

func volumeNameFor(pvc *corev1.PersistentVolumeClaim) string {
	return "kubesim-pv-" + string(pvc.UID)
}

func (fk *fakeKubelet) provisionVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim) {
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
		return
	}
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	modes := pvc.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pathType := corev1.HostPathDirectoryOrCreate
	path := "/var/lib/kubesim/volumes/" + string(pvc.UID)
	if fk.volumeDir != "" {
		// Real nodes mount the directory for real; pods run as non-root users, and a hostPath
		// volume is not chowned to the pod's fsGroup, so the directory is world-writable.
		path = filepath.Join(fk.volumeDir, string(pvc.UID))
		if err := os.MkdirAll(path, 0o755); err != nil {
			log.Printf("fake-kubelet: volume directory for %s/%s: %v", pvc.Namespace, pvc.Name, err)
			return
		}
		if err := os.Chmod(path, 0o1777); err != nil {
			log.Printf("fake-kubelet: volume directory for %s/%s: %v", pvc.Namespace, pvc.Name, err)
			return
		}
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   volumeNameFor(pvc),
			Labels: map[string]string{labelClaimUID: string(pvc.UID)},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   modes,
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &pathType},
			},
		},
	}
	if _, err := fk.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		log.Printf("fake-kubelet: volume for %s/%s: %v", pvc.Namespace, pvc.Name, err)
	}
}

func (fk *fakeKubelet) releaseVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim) {
	err := fk.client.CoreV1().PersistentVolumes().Delete(ctx, volumeNameFor(pvc), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Printf("fake-kubelet: delete volume of %s/%s: %v", pvc.Namespace, pvc.Name, err)
	}
	if fk.volumeDir != "" && pvc.UID != "" {
		if err := os.RemoveAll(filepath.Join(fk.volumeDir, string(pvc.UID))); err != nil {
			log.Printf("fake-kubelet: remove volume directory of %s/%s: %v", pvc.Namespace, pvc.Name, err)
		}
	}
}

// watchClaims provisions a volume for every claim that has none and deletes it with the claim.
func (fk *fakeKubelet) watchClaims(ctx context.Context, factory informers.SharedInformerFactory) error {
	_, err := factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				fk.provisionVolume(ctx, pvc)
			}
		},
		UpdateFunc: func(_, obj interface{}) {
			if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				fk.provisionVolume(ctx, pvc)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				fk.releaseVolume(ctx, pvc)
			}
		},
	})
	return err
}
